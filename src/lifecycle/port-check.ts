import { createServer } from 'node:net';

/**
 * Whether the HTTP port can be listened on, asked before anything else
 * starts (the embedded database among them): undefined when it can, else
 * why not. Port 0 (any free port) always can.
 */
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
