import { routePattern } from '../http/route-pattern';

export const PUSH_CONTROLLER_PATH = 'api/v1/push';
export const PUSH_ROUTE = routePattern('POST', `/${PUSH_CONTROLLER_PATH}`);
