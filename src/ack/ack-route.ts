import { routePattern } from '../http/route-pattern';

export const ACK_CONTROLLER_PATH = 'api/v1/ack';
export const ACK_BATCH_PATH = 'batch';
export const ACK_ROUTE = routePattern('POST', `/${ACK_CONTROLLER_PATH}`);
export const ACK_BATCH_ROUTE = routePattern('POST', `/${ACK_CONTROLLER_PATH}/${ACK_BATCH_PATH}`);
