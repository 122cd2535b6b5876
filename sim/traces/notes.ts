// A reader's notes name what it did to which pods; a trace of 1,250 VMs must
// not turn into 1,250 lines, so a note lists a few names and counts the rest.

const SHOWN = 5;

/** '3 VMs (4, 9, 12): text', or nothing when ids is empty; kind is singular ('VM', 'machine or container'). */
export function idsNote(notes: string[], ids: string[], kind: string, text: string): void {
  if (ids.length === 0) return;
  const shown = ids.slice(0, SHOWN).join(', ');
  const more = ids.length > SHOWN ? ` and ${ids.length - SHOWN} more` : '';
  const kinds = ids.length === 1 ? kind : kind.replace(/(\w+)$/, '$1s');
  notes.push(`${ids.length} ${kinds} (${shown}${more}): ${text}`);
}
