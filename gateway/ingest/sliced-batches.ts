// The ingest threads' batches, applied to the store in order but a slice per
// turn of the main thread's event loop. A thread that was short of CPU
// flushes thousands of samples at once, and a port hands every queued message
// over in one turn: applied whole, the batches of 2,500 agents held the main
// thread for up to 65 ms at a time, and every review that arrived waited.

/** Rows (and ops, one each) applied per turn: a few milliseconds of store work. */
export const ROWS_PER_TURN = 500;

/** A thread's batch as the queue walks it: rows in order, each op applied once the rows before it are. */
export interface Batch {
  readonly rowCount: number;
  /** Ops in order; `after`: how many of the batch's rows come before it. */
  readonly ops: ReadonlyArray<{ readonly after: number }>;
}

/** Each step catches its own errors: one bad sample costs itself, never the queue. */
export interface BatchSteps<B extends Batch> {
  row(batch: B, index: number): void;
  op(batch: B, index: number): void;
  /** Every row and op of the batch applied. */
  done(batch: B): void;
}

export class SlicedBatches<B extends Batch> {
  readonly #queue: Array<{ batch: B; row: number; op: number }> = [];
  #scheduled = false;

  constructor(
    private readonly steps: BatchSteps<B>,
    private readonly rowsPerTurn = ROWS_PER_TURN,
  ) {}

  /** Queues a batch; the first slice is applied at once when nothing is waiting. */
  push(batch: B): void {
    this.#queue.push({ batch, row: 0, op: 0 });
    if (!this.#scheduled) this.#drain();
  }

  /** Batches not yet applied in full. */
  get pending(): number {
    return this.#queue.length;
  }

  /** Drops what is queued (the thread that sent it is gone, and its streams with it). */
  clear(): void {
    this.#queue.length = 0;
  }

  readonly #drain = (): void => {
    this.#scheduled = false;
    let budget = this.rowsPerTurn;
    while (budget > 0 && this.#queue.length > 0) {
      const cur = this.#queue[0]!;
      const { batch } = cur;
      const nextOp = batch.ops[cur.op];
      const end = Math.min(nextOp ? nextOp.after : batch.rowCount, batch.rowCount);
      if (cur.row < end) {
        const stop = Math.min(end, cur.row + budget);
        budget -= stop - cur.row;
        for (; cur.row < stop; cur.row++) this.steps.row(batch, cur.row);
      } else if (nextOp) {
        budget -= 1;
        cur.op += 1;
        this.steps.op(batch, cur.op - 1);
      } else {
        this.#queue.shift();
        this.steps.done(batch);
      }
    }
    if (this.#queue.length > 0) {
      this.#scheduled = true;
      setImmediate(this.#drain);
    }
  };
}
