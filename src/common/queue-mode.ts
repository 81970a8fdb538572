/** The consumer group of a pop or ack that names none: plain queue semantics, one cursor per partition. */
export const QUEUE_MODE_GROUP = '__QUEUE_MODE__';
