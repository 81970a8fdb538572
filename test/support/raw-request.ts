import { request as httpRequest, Server } from 'node:http';
import { AddressInfo } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  /** The body exactly as sent, for byte-for-byte comparisons. */
  text: string;
}

/**
 * A request with exactly the given headers and bytes. supertest adds a
 * content-type to string bodies, which hides the "no content-type" cases.
 */
export async function rawRequest(
  server: Server,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer | string,
): Promise<RawResponse> {
  if (!server.listening) {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  }
  const { port } = server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    const call = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown = text;
        try {
          parsed = text === '' ? undefined : JSON.parse(text);
        } catch {
          // keep the text: the caller asserts on it
        }
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: parsed, text });
      });
    });
    call.on('error', reject);
    if (body !== undefined) call.end(body);
    else call.end();
  });
}

/** A request carrying an already gzipped JSON body, sent as it is with its exact length. */
export function rawGzipRequest(
  server: Server,
  method: string,
  path: string,
  headers: Record<string, string>,
  gzipped: Buffer,
): Promise<RawResponse> {
  return rawRequest(
    server,
    method,
    path,
    {
      ...headers,
      'content-type': 'application/json',
      'content-encoding': 'gzip',
      'content-length': String(gzipped.length),
    },
    gzipped,
  );
}
