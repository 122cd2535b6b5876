// patches/@grpc+grpc-js+*.patch is in place: grpc-js's message framer lets go
// of a message's bytes once it has assembled it (see patches/README.md).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';

interface Decoder {
  write(data: Buffer): Buffer[];
  readPartialMessage: Buffer[];
  readCompressFlag: Buffer;
}
const require = createRequire(import.meta.url);
const { StreamDecoder } = require('@grpc/grpc-js/build/src/stream-decoder.js') as { StreamDecoder: new (max: number) => Decoder };

const framed = (payload: Buffer) => Buffer.concat([Buffer.from([0]), Buffer.from([0, 0, 0, payload.length]), payload]);

describe('@grpc/grpc-js StreamDecoder (patched)', () => {
  it('keeps no slice of a frame once its message is read, and still splits messages across frames', () => {
    const decoder = new StreamDecoder(-1);
    // Its own memory (Buffer.alloc is not pooled), so a slice of it is recognizable by its .buffer.
    const bytes = Buffer.concat([framed(Buffer.from('first')), framed(Buffer.from('second'))]);
    const frame = Buffer.alloc(bytes.length);
    bytes.copy(frame);
    // Split inside the second message's payload: its first piece waits on the decoder.
    const a = decoder.write(frame.subarray(0, 17));
    assert.deepEqual(a.map((m) => m.subarray(5).toString()), ['first']);
    assert.equal(decoder.readPartialMessage.length, 1);
    const b = decoder.write(frame.subarray(17));
    assert.deepEqual(b.map((m) => m.subarray(5).toString()), ['second']);
    // Unpatched, both stayed: the chunk list and a one-byte view of the last frame.
    assert.equal(decoder.readPartialMessage.length, 0);
    assert.notEqual(decoder.readCompressFlag.buffer, frame.buffer);
    assert.equal(b[0]!.buffer === frame.buffer, false, 'the message is a copy');
  });
});
