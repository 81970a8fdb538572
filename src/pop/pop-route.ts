import { routePattern } from '../http/route-pattern';

export const POP_CONTROLLER_PATH = 'api/v1/pop/queue';
export const POP_QUEUE_PATH = ':queue';
export const POP_PARTITION_PATH = ':queue/partition/:partition';
export const POP_QUEUE_ROUTE = routePattern('GET', `/${POP_CONTROLLER_PATH}/${POP_QUEUE_PATH}`);
export const POP_PARTITION_ROUTE = routePattern('GET', `/${POP_CONTROLLER_PATH}/${POP_PARTITION_PATH}`);
