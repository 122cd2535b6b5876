// grpc-js's message framer (StreamDecoder, one per HTTP/2 stream) kept the
// last message's pieces until the stream's next message: the compress-flag
// byte and the message chunks, each a slice of the HTTP/2 DATA frame's
// buffer. An agent sends one message a second, so every stream's last frame
// outlived a scavenge and was promoted: at 10,000 agents that was most of
// what the ingest thread's heap held live (a sampling heap profile of the
// thread: 3.7 of 4.7 MB sampled), and its scavenges copied it. Measured at
// 10,000 agents with the same fix applied to grpc-js's file, two runs each,
// unfixed and fixed alternating: the thread's scavenge p50 3.6-7.3 -> 2.1-3.5
// ms, no mark-compact of its heap during the GetNode runs (unfixed: 1 in 4),
// gateway RSS max 440-443 -> 406-422 MiB (docs/benchmarks.md).
//
// The fix is applied here, at run time, rather than to the installed file
// (patch-package in a postinstall script): that runs for every way the
// package is installed (npm install -g, a Docker build with scripts off,
// package managers that block dependency scripts) and touches no file of a
// dependency another package may share. After each write the decoder's flag
// byte is copied into a one-byte buffer of its own, and once a message is
// assembled (Buffer.concat has copied it) its chunk list is emptied. The
// decoder is checked before and after: if this grpc-js is shaped differently
// or already lets go, nothing is changed and the status says why
// (the gateway logs it; test/grpc-stream-decoder.test.ts fails on it).
import { createRequire } from 'node:module';

export interface Decoder {
  write(data: Buffer): Buffer[];
  readState: number;
  readCompressFlag: Buffer;
  readPartialMessage: Buffer[];
}
export type DecoderClass = new (maxReadMessageLength: number) => Decoder;

export type StreamDecoderFix =
  | { state: 'applied' }
  /** This grpc-js already lets go of a message's bytes. */
  | { state: 'not needed' }
  /** Left as it was: why, in words for a log line. */
  | { state: 'not applied'; why: string };

const OWN_FLAG = Symbol('oversell.ownCompressFlag');
const MODULE = '@grpc/grpc-js/build/src/stream-decoder.js';

/** Why a decoder keeps bytes of a frame once it has read the frame's messages, or undefined if it keeps none. */
export function keptSlice(Decoder: DecoderClass): string | undefined {
  const decoder = new Decoder(-1);
  const framed = (payload: string) => Buffer.concat([Buffer.from([0, 0, 0, 0, payload.length]), Buffer.from(payload)]);
  // Its own memory (Buffer.alloc is not pooled), so a slice of it is recognizable by its .buffer.
  const bytes = Buffer.concat([framed('first'), framed('second')]);
  const frame = Buffer.alloc(bytes.length);
  bytes.copy(frame);
  // Split inside the second message's payload: its first piece waits on the decoder.
  const messages = [...decoder.write(frame.subarray(0, 17)), ...decoder.write(frame.subarray(17))].map((m) => m.subarray(5).toString());
  if (messages.join() !== 'first,second') throw new Error(`decoded ${JSON.stringify(messages)} from two framed messages`);
  if (!Array.isArray(decoder.readPartialMessage) || !Buffer.isBuffer(decoder.readCompressFlag)) throw new Error('no readPartialMessage list or readCompressFlag buffer');
  if (decoder.readPartialMessage.length > 0) return 'keeps the last message\'s chunks';
  if (decoder.readCompressFlag.buffer === frame.buffer) return 'keeps a slice of the last frame for the compress flag';
  return undefined;
}

function fix(Decoder: DecoderClass): StreamDecoderFix {
  const proto = Decoder.prototype;
  const write = proto.write;
  const fresh = new Decoder(-1);
  const NO_DATA = fresh.readState;
  if (typeof write !== 'function' || typeof NO_DATA !== 'number' || !Buffer.isBuffer(fresh.readCompressFlag) || !Array.isArray(fresh.readPartialMessage)) {
    return { state: 'not applied', why: 'StreamDecoder has no write, readState, readCompressFlag or readPartialMessage' };
  }
  try {
    if (keptSlice(Decoder) === undefined) return { state: 'not needed' };
  } catch (err) {
    return { state: 'not applied', why: `StreamDecoder does not decode as expected (${(err as Error).message})` };
  }
  proto.write = function writeAndLetGo(this: Decoder & { [OWN_FLAG]?: Buffer }, data: Buffer): Buffer[] {
    const messages = write.call(this, data);
    const flag = this.readCompressFlag;
    const own = (this[OWN_FLAG] ??= Buffer.alloc(1));
    if (flag !== own) {
      own[0] = flag[0]!;
      this.readCompressFlag = own;
    }
    if (this.readState === NO_DATA && this.readPartialMessage.length > 0) this.readPartialMessage.length = 0;
    return messages;
  };
  let still: string | undefined;
  try {
    still = keptSlice(Decoder);
  } catch (err) {
    still = (err as Error).message;
  }
  if (still !== undefined) {
    proto.write = write;
    return { state: 'not applied', why: `with the fix, StreamDecoder still ${still}` };
  }
  return { state: 'applied' };
}

let done: StreamDecoderFix | undefined;

/**
 * Makes grpc-js's StreamDecoder let go of each message's bytes once it has
 * read it, in this thread (a worker thread loads modules of its own and calls
 * this itself). Idempotent.
 */
export function fixStreamDecoder(): StreamDecoderFix {
  if (done) return done;
  let Decoder: DecoderClass;
  try {
    // The copy `import '@grpc/grpc-js'` resolves to from here: the same module instance grpc-js itself uses.
    ({ StreamDecoder: Decoder } = createRequire(import.meta.url)(MODULE) as { StreamDecoder: DecoderClass });
  } catch (err) {
    return (done = { state: 'not applied', why: `cannot load ${MODULE} (${(err as Error).message})` });
  }
  return (done = fix(Decoder));
}

/** A log line's words for a fix that was not applied, or undefined. */
export function streamDecoderWarning(f: StreamDecoderFix): string | undefined {
  return f.state === 'not applied'
    ? `grpc-js StreamDecoder runs unfixed (${f.why}): each agent stream keeps its last message's frame until the next one, 20-35 MiB more gateway RSS and scavenges about twice as long at 10,000 agents; check lib/grpc-stream-decoder.ts against this grpc-js version`
    : undefined;
}
