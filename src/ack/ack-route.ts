import { fixedPostRoute } from '../http/fixed-route';

export const ACK_CONTROLLER_PATH = 'api/v1/ack';
export const ACK_BATCH_PATH = 'batch';
export const ACK_ROUTE = fixedPostRoute(`/${ACK_CONTROLLER_PATH}`);
export const ACK_BATCH_ROUTE = fixedPostRoute(`/${ACK_CONTROLLER_PATH}/${ACK_BATCH_PATH}`);
