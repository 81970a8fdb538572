/**
 * Payloads as a producer may write them (keys in its order and repeated, numbers JavaScript cannot hold or would
 * rewrite, escapes, whitespace and newlines) and as the broker must store and answer them: the same text, minified.
 */
export const SENT_PAYLOADS: ReadonlyArray<{ sent: string; stored: string }> = [
  { sent: '{"orderId":1}', stored: '{"orderId":1}' },
  { sent: '{"b":1,"a":2}', stored: '{"b":1,"a":2}' },
  { sent: '{"big":12345678901234567890123}', stored: '{"big":12345678901234567890123}' },
  { sent: '{"x":1e400}', stored: '{"x":1e400}' },
  { sent: '{"f":1.50}', stored: '{"f":1.50}' },
  { sent: '{"s":"\\u00e9\\n"}', stored: '{"s":"\\u00e9\\n"}' },
  {
    sent: '{ "nested" : [ [1 ,\n  2.0], {"k" :\t[ ]} , " a  b " ]\r\n}',
    stored: '{"nested":[[1,2.0],{"k":[]}," a  b "]}',
  },
  { sent: '{"d":1, "d":2, "zero":-0, "q":"say \\"{,}\\""}', stored: '{"d":1,"d":2,"zero":-0,"q":"say \\"{,}\\""}' },
  { sent: '[ 1E+2 ,\n "x" ]', stored: '[1E+2,"x"]' },
];

/** A JSON array of push items as text, one per SENT_PAYLOADS entry, transactionId `${prefix}-${n}`, over lines. */
export function sentItems(queue: string, prefix: string): string {
  const items = SENT_PAYLOADS.map(
    ({ sent }, n) => `  {"queue": ${JSON.stringify(queue)}, "transactionId": "${prefix}-${n}", "payload": ${sent} }`,
  );
  return `[\n${items.join(',\n')}\n]`;
}

/** The answer's own text carries each message's payload as stored, after its transactionId and traceId (null). */
export function expectPayloadsAsSent(answer: string, prefix: string): void {
  for (const n of SENT_PAYLOADS.keys()) expect(answer).toContain(storedAs(`${prefix}-${n}`, n));
}

/** How an answer writes the message of this transactionId whose payload is SENT_PAYLOADS[n]. */
export function storedAs(transactionId: string, n: number): string {
  return `"transactionId":${JSON.stringify(transactionId)},"traceId":null,"data":${SENT_PAYLOADS[n].stored},`;
}
