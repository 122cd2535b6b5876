// The parts of a program that start and close (listeners, watches, timers):
// each registers its own start and close where it is built, and the program
// starts them in the order they were added and closes them in reverse, last
// started first, as fastify runs its plugins' onClose hooks and koordlet
// separates building (New) from running (Run). Nobody keeps a hand-ordered
// list of what to close, and a part added later cannot be forgotten there.

export interface Part {
  /** Names the part in errors and logs. */
  readonly name: string;
  /** Listens, watches, starts timers. Without it the part only needs closing. */
  start?(): Promise<void> | void;
  /** Undoes start and releases what building took: called once, also when start never ran or failed. */
  close(): Promise<void> | void;
}

export class Lifecycle {
  readonly #parts: Part[] = [];
  readonly #onCloseError: (part: string, err: Error) => void;
  #starting = false;
  #closing: Promise<void> | undefined;

  /** onCloseError: a part failed to close; the others still close. */
  constructor(onCloseError: (part: string, err: Error) => void) {
    this.#onCloseError = onCloseError;
  }

  /** Registers a part, returned as given; while building, before start(). */
  add<P extends Part>(part: P): P {
    if (this.#starting || this.#closing) throw new Error(`part ${part.name} added after start or close: parts are added while the program is built`);
    this.#parts.push(part);
    return part;
  }

  /** Starts each part in the order added. If one fails, or close() is called meanwhile, every part is closed and this rejects. */
  async start(): Promise<void> {
    if (this.#starting) throw new Error('started twice');
    this.#starting = true;
    for (const part of this.#parts) {
      try {
        if (this.#closing) throw new Error(`closed while starting, before ${part.name} started`);
        await part.start?.();
      } catch (err) {
        await this.close();
        throw err;
      }
    }
  }

  /** Closes every part, last added first, one after another; the same promise on every call. Never rejects. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const part of [...this.#parts].reverse()) {
        try {
          await part.close();
        } catch (err) {
          this.#onCloseError(part.name, err instanceof Error ? err : new Error(String(err)));
        }
      }
    })();
    return this.#closing;
  }
}
