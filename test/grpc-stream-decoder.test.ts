// grpc-js's message framer lets go of a message's bytes once it has assembled
// it, fixed at run time by lib/grpc-stream-decoder.ts (why: its header). A
// grpc-js upgrade that changes the decoder fails here.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import { Worker } from 'node:worker_threads';
import { fixStreamDecoder, keptSlice, streamDecoderWarning, type DecoderClass } from '../lib/grpc-stream-decoder.js';
import { startTestGateway } from './helpers/gateway.js';

const require = createRequire(import.meta.url);
const { StreamDecoder } = require('@grpc/grpc-js/build/src/stream-decoder.js') as { StreamDecoder: DecoderClass };

const framed = (payload: Buffer) => Buffer.concat([Buffer.from([0]), Buffer.from([0, 0, 0, payload.length]), payload]);

describe('@grpc/grpc-js StreamDecoder', () => {
  it('as installed, keeps a slice of the last frame (what the fix is for)', () => {
    // Runs first, before anything in this process applied the fix.
    assert.equal(keptSlice(StreamDecoder), 'keeps the last message\'s chunks');
  });

  it('fixed by the gateway: keeps no slice of a frame once its message is read, and still splits messages across frames', async () => {
    const gw = await startTestGateway();
    await gw.close();
    assert.deepEqual(fixStreamDecoder(), { state: 'applied' });
    assert.equal(streamDecoderWarning(fixStreamDecoder()), undefined);
    const decoder = new StreamDecoder(-1);
    // Its own memory (Buffer.alloc is not pooled), so a slice of it is recognizable by its .buffer.
    const bytes = Buffer.concat([framed(Buffer.from('first')), framed(Buffer.from('second')), framed(Buffer.alloc(0)), framed(Buffer.from([1, 2, 3]))]);
    const frame = Buffer.alloc(bytes.length);
    bytes.copy(frame);
    // Split inside the second message's payload: its first piece waits on the decoder.
    const a = decoder.write(frame.subarray(0, 17));
    assert.deepEqual(a.map((m) => m.subarray(5).toString()), ['first']);
    assert.equal(decoder.readPartialMessage.length, 1);
    const b = decoder.write(frame.subarray(17, 26));
    assert.deepEqual(b.map((m) => m.subarray(5).toString()), ['second', '']);
    // Unfixed, both stayed: the chunk list and a one-byte view of the last frame.
    assert.equal(decoder.readPartialMessage.length, 0);
    assert.notEqual(decoder.readCompressFlag.buffer, frame.buffer);
    assert.equal(b[0]!.buffer === frame.buffer, false, 'the message is a copy');
    // Byte by byte, the flag and size of the next message still come through whole.
    const c = [...frame.subarray(26)].flatMap((byte) => decoder.write(Buffer.from([byte])));
    assert.deepEqual(c.map((m) => [...m]), [[0, 0, 0, 0, 3, 1, 2, 3]]);
  });

  it('a worker thread has grpc-js modules of its own, and the fix applies there too', async () => {
    const url = new URL('../lib/grpc-stream-decoder.ts', import.meta.url).href;
    const tsx = import.meta.resolve('tsx/esm/api');
    const worker = new Worker(
      `import(${JSON.stringify(tsx)}).then((t) => { t.register(); return import(${JSON.stringify(url)}); })
         .then((m) => require('node:worker_threads').parentPort.postMessage([m.keptSlice(require(${JSON.stringify(require.resolve('@grpc/grpc-js/build/src/stream-decoder.js'))}).StreamDecoder) ?? 'none', m.fixStreamDecoder()]))`,
      { eval: true },
    );
    const [before, fixed] = await new Promise<[string, unknown]>((resolve, reject) => worker.once('message', resolve).once('error', reject));
    await worker.terminate();
    assert.equal(before, 'keeps the last message\'s chunks');
    assert.deepEqual(fixed, { state: 'applied' });
  });
});
