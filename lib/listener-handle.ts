// A listening socket's own file descriptor for each thread that accepts on
// it, so several worker threads serve one port. Node 20 has no SO_REUSEPORT,
// and threads that listen on one shared fd number are tied together: when any
// of them closes its server, or dies (a worker's teardown closes its handles),
// that fd is closed under all the others, the port is released, and the number
// may be reused by an unrelated file the others would later close. With a
// descriptor each, a thread closes only its own, and the socket (with its
// queue of connections not yet accepted) lives while any descriptor does.
//
// Node has no dup(). Its IPC channel passes handles with SCM_RIGHTS, which
// makes a new descriptor in the receiver: a short-lived child process is
// handed the fd (stdio) and sends it straight back. The child never listens,
// so it accepts no connection.
import { spawn } from 'node:child_process';

/** Node's handle of a listening socket (a TCP wrap): net.Server.listen(handle) serves on it. */
export interface ListenerHandle {
  readonly fd: number;
  close(callback?: () => void): void;
}

/**
 * The child: wraps fd 4 (the socket, not read from) and sends its handle back
 * as a raw handle, which the receiver gets unopened by any server.
 */
const CHILD = `
const net = require('node:net');
const socket = new net.Socket({ fd: 4, readable: false, writable: false });
process.send('listener', socket._handle, () => process.disconnect());
`;

const TIMEOUT_MS = 10_000;

/** A new descriptor of the listening socket `fd`, owned by the calling thread: close it when done (it closes only this one). */
export function duplicateListener(fd: number): Promise<ListenerHandle> {
  return new Promise((resolve, reject) => {
    // No environment: NODE_OPTIONS (a --require, --import) must not run in the child.
    const child = spawn(process.execPath, ['-e', CHILD], { stdio: ['ignore', 'ignore', 'pipe', 'ipc', fd], env: {} });
    let stderr = '';
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill();
      reject(new Error(`could not give this thread its own descriptor of the listening socket (fd ${fd}): ${why}; the thread cannot serve the shared port (${process.execPath} must be able to run as a child process)`));
    };
    const timer = setTimeout(() => fail(`the helper process did not answer in ${TIMEOUT_MS / 1000}s`), TIMEOUT_MS);
    child.stderr?.on('data', (d: Buffer) => {
      if (stderr.length < 2000) stderr += d.toString();
    });
    child.once('message', (_m, sent) => {
      // A raw handle (Node's TCP wrap), not the Socket or Server the types name: the child sends its _handle.
      const handle = sent as unknown as ListenerHandle | undefined;
      if (settled) return void handle?.close();
      settled = true;
      clearTimeout(timer);
      if (typeof handle?.fd !== 'number') return reject(new Error(`the helper process sent no listening socket back for fd ${fd}`));
      resolve(handle);
    });
    child.once('error', (err) => fail(err.message));
    child.once('exit', (code, signal) => fail(`the helper process exited (${signal ?? `code ${code}`}) before sending it${stderr ? `: ${stderr.trim()}` : ''}`));
  });
}
