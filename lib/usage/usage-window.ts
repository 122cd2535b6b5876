// A node's recent usage points, oldest first, as numbers in one Float64Array
// (five a point) rather than one object per point: no long-lived objects for
// every mark-compact to walk, and a decide() reads a window from one place.

export interface WindowPoint {
  /** Agent clock; the window is cut on the agent's own timeline so replays line up. */
  timestampMs: number;
  cpuMillicores: number;
  memoryBytes: number;
  /** PSI some avg10, percent; 0 where the kernel has no PSI. */
  cpuPressure: number;
  memoryPressure: number;
}

/** Windows are never kept longer than this, whatever a policy asks (memory: a point a second per node). */
export const MAX_RETAIN_MS = 600_000;

/** Where each number of a point sits, for get(). */
export const COLUMN = { timestampMs: 0, cpuMillicores: 1, memoryBytes: 2, cpuPressure: 3, memoryPressure: 4 } as const;
export type Column = (typeof COLUMN)[keyof typeof COLUMN];
const WIDTH = 5;
/** Points a new window has room for; it grows as the retention asks. */
const INITIAL_POINTS = 16;

export class UsageWindow {
  #data = new Float64Array(INITIAL_POINTS * WIDTH);
  /** Index of the oldest point: dropping from the front moves it instead of the data. */
  #start = 0;
  #length = 0;

  static of(points: Iterable<WindowPoint>): UsageWindow {
    const window = new UsageWindow();
    for (const p of points) window.add(p);
    return window;
  }

  get length(): number {
    return this.#length;
  }

  /** Points there is room for before it moves or grows. */
  get capacity(): number {
    return this.#data.length / WIDTH;
  }

  /** Column `column` of the i-th point, oldest first (0 <= i < length). */
  get(i: number, column: Column): number {
    return this.#data[(this.#start + i) * WIDTH + column]!;
  }

  /** The i-th point as an object, for what shows it rather than computes over it. */
  point(i: number): WindowPoint {
    return {
      timestampMs: this.get(i, COLUMN.timestampMs),
      cpuMillicores: this.get(i, COLUMN.cpuMillicores),
      memoryBytes: this.get(i, COLUMN.memoryBytes),
      cpuPressure: this.get(i, COLUMN.cpuPressure),
      memoryPressure: this.get(i, COLUMN.memoryPressure),
    };
  }

  /** Every point as an object, oldest first. */
  points(): WindowPoint[] {
    return Array.from({ length: this.#length }, (_, i) => this.point(i));
  }

  /** Timestamp of the newest point; undefined when empty. */
  newestMs(): number | undefined {
    return this.#length === 0 ? undefined : this.get(this.#length - 1, COLUMN.timestampMs);
  }

  /** Adds a point where its timestamp puts it: replays across agent instances can arrive out of order. */
  add(p: WindowPoint): void {
    this.#makeRoom();
    let at = this.#length;
    while (at > 0 && this.get(at - 1, COLUMN.timestampMs) > p.timestampMs) at -= 1;
    const data = this.#data;
    const offset = (this.#start + at) * WIDTH;
    if (at < this.#length) data.copyWithin(offset + WIDTH, offset, (this.#start + this.#length) * WIDTH);
    data[offset + COLUMN.timestampMs] = p.timestampMs;
    data[offset + COLUMN.cpuMillicores] = p.cpuMillicores;
    data[offset + COLUMN.memoryBytes] = p.memoryBytes;
    data[offset + COLUMN.cpuPressure] = p.cpuPressure;
    data[offset + COLUMN.memoryPressure] = p.memoryPressure;
    this.#length += 1;
  }

  /**
   * Adds a point and keeps `retainMs` before the newest, on the timeline of
   * the points: a point behind the whole window means the clock that stamped
   * them stepped back (an NTP fix, or one bad timestamp before it), and the
   * window restarts on the new timeline instead of keeping every later point
   * out until the clock catches up.
   */
  keep(p: WindowPoint, retainMs: number): void {
    const t = p.timestampMs;
    const newestMs = this.newestMs() ?? t;
    const cut = t <= newestMs - retainMs ? Infinity : Math.max(newestMs, t) - retainMs;
    this.dropThrough(cut);
    if (cut === Infinity || t > cut) this.add(p);
  }

  /** Drops every point at or before cutMs. */
  dropThrough(cutMs: number): void {
    let drop = 0;
    while (drop < this.#length && this.get(drop, COLUMN.timestampMs) <= cutMs) drop += 1;
    this.#start = drop === this.#length ? 0 : this.#start + drop;
    this.#length -= drop;
  }

  /** Room for one more point at the end: move the points to the front, or grow by a quarter when they fill most of it. */
  #makeRoom(): void {
    const capacity = this.capacity;
    if (this.#start + this.#length < capacity) return;
    const slack = Math.max(8, this.#length >> 2);
    const live = this.#data.subarray(this.#start * WIDTH, (this.#start + this.#length) * WIDTH);
    if (this.#length + slack > capacity) {
      const grown = new Float64Array((this.#length + slack) * WIDTH);
      grown.set(live);
      this.#data = grown;
    } else {
      this.#data.copyWithin(0, this.#start * WIDTH, (this.#start + this.#length) * WIDTH);
    }
    this.#start = 0;
  }
}
