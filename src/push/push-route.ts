import { fixedPostRoute } from '../http/fixed-route';

export const PUSH_CONTROLLER_PATH = 'api/v1/push';
export const PUSH_ROUTE = fixedPostRoute(`/${PUSH_CONTROLLER_PATH}`);
