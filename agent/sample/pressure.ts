// PSI files: /proc/pressure/{cpu,memory} and the cgroup v2 *.pressure files share one format:
//   some avg10=0.12 avg60=0.05 avg300=0.00 total=12345
//   full avg10=0.00 avg60=0.00 avg300=0.00 total=0

export interface PsiLine {
  avg10: number;
  avg60: number;
}

export interface PsiFile {
  some: PsiLine;
  /** Absent for system-wide cpu on kernels before 5.13. */
  full: PsiLine;
}

const ZERO: PsiLine = { avg10: 0, avg60: 0 };

export function parsePsi(text: string): PsiFile {
  const out: PsiFile = { some: ZERO, full: ZERO };
  for (const line of text.split('\n')) {
    const m = /^(some|full)\s+avg10=([\d.]+)\s+avg60=([\d.]+)/.exec(line);
    if (m) out[m[1] as 'some' | 'full'] = { avg10: Number(m[2]), avg60: Number(m[3]) };
  }
  return out;
}
