import { createServer } from 'node:net';

/** Asked before anything else starts (the embedded database among them). */
export function portProblem(host: string, port: number): Promise<string | undefined> {
  if (port === 0) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      resolve(
        error.code === 'EADDRINUSE'
          ? `port ${port} on ${host} is already in use (another broker?); set PORT to a free one`
          : `cannot listen on ${host}:${port}: ${error.code ?? error.message}`,
      );
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}
