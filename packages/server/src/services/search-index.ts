/**
 * Segment search's index of one sandbox (#37): per field, the vocabulary of distinct words (or
 * keyword values) with the slots of the documents holding each, bucketed by length (a phrase
 * re-reads its candidates' words from their text). A query's term is then tested once per distinct word of
 * the vocabulary — never once per word of every document — and its work is counted against a
 * SearchBudget (search-budget.ts).
 *
 * The index is a cache, never the truth: every search hands it the sandbox's documents as the
 * store returned them, and `sync` re-indexes those whose text changed and drops those that are
 * gone, so several processes (or writes this one never saw) cannot make it answer stale.
 */

export interface SearchDoc {
  id: string;
  namespace: string;
  name: string;
  description: string;
  parentFolderId: string;
}

export const TEXT_FIELDS = ["name", "description"] as const;
export const KEYWORD_FIELDS = ["segmentId", "folderId", "folderLocation", "parentFolderId"] as const;
export type TextField = (typeof TEXT_FIELDS)[number];
export type KeywordField = (typeof KEYWORD_FIELDS)[number];
export type FieldKey = TextField | KeywordField;

/** A document as the index holds it: its text fields' words are recomputed when needed, not kept (less for the collector to trace). */
export interface IndexedDoc {
  doc: SearchDoc;
  keywords: Record<KeywordField, string>;
}

const WORD = /[\p{L}\p{N}]+/gu;

/** A text field's words: lower-cased runs of letters and digits. */
export function words(text: string): string[] {
  return text.toLowerCase().match(WORD) ?? [];
}

export function indexDoc(doc: SearchDoc): IndexedDoc {
  return { doc, keywords: { segmentId: doc.id.toLowerCase(), folderId: "", folderLocation: "", parentFolderId: doc.parentFolderId.toLowerCase() } };
}

/** A text field's words, in order. */
export function wordsOf(d: IndexedDoc, field: TextField): string[] {
  return words(field === "name" ? d.doc.name : d.doc.description);
}

/**
 * The distinct words (or values) of one field with their documents' slots: a word of one document
 * (most of them, in a large vocabulary) holds its slot as a number, others an array.
 */
export class Vocabulary {
  private readonly postingsOf = new Map<string, number | number[]>();
  /** Words by length (UTF-16 code units), so that fuzzy and wildcard terms skip impossible lengths. Removed words linger until `compact`. */
  private readonly byLength = new Map<number, string[]>();
  private stale = 0;

  /** Add `slot` to the word's postings. A document adds all its words before the next one, so a repeat is the last slot. */
  add(word: string, slot: number): void {
    const p = this.postingsOf.get(word);
    if (p === undefined) {
      this.postingsOf.set(word, slot);
      let bucket = this.byLength.get(word.length);
      if (bucket === undefined) this.byLength.set(word.length, (bucket = []));
      bucket.push(word);
    } else if (typeof p === "number") {
      if (p !== slot) this.postingsOf.set(word, [p, slot]);
    } else if (p[p.length - 1] !== slot) p.push(slot);
  }

  remove(word: string, slot: number): void {
    const p = this.postingsOf.get(word);
    if (p === undefined) return;
    if (typeof p === "number") {
      if (p !== slot) return;
      this.postingsOf.delete(word);
      this.stale++;
      return;
    }
    const at = p.indexOf(slot);
    if (at >= 0) p.splice(at, 1);
    if (p.length === 1) this.postingsOf.set(word, p[0]!);
  }

  /** The slots of the documents holding the word (none: empty). */
  postings(word: string): readonly number[] {
    const p = this.postingsOf.get(word);
    return p === undefined ? [] : typeof p === "number" ? [p] : p;
  }

  has(word: string): boolean {
    return this.postingsOf.has(word);
  }

  words(): IterableIterator<string> {
    return this.postingsOf.keys();
  }

  /** The lengths words have, and the words of one length (maybe removed ones: check `has`). */
  lengths(): number[] {
    return [...this.byLength.keys()];
  }

  ofLength(n: number): readonly string[] {
    return this.byLength.get(n) ?? [];
  }

  /** Drop removed words from the length buckets once they are a good part of them. */
  compact(): void {
    if (this.stale < 1024 || this.stale * 4 < this.postingsOf.size) return;
    for (const [n, bucket] of this.byLength) {
      const live = [...new Set(bucket.filter((w) => this.postingsOf.has(w)))];
      if (live.length === 0) this.byLength.delete(n);
      else this.byLength.set(n, live);
    }
    this.stale = 0;
  }

  get size(): number {
    return this.postingsOf.size;
  }
}

/** The terms of one document's field (repeated words too: the vocabulary adds a slot once). */
function termsOf(d: IndexedDoc, field: FieldKey): readonly string[] {
  return field === "name" || field === "description" ? wordsOf(d, field) : [d.keywords[field]];
}

const FIELDS: readonly FieldKey[] = [...TEXT_FIELDS, ...KEYWORD_FIELDS];

export class SearchIndex {
  private readonly slots: (IndexedDoc | undefined)[] = [];
  private readonly free: number[] = [];
  private readonly slotById = new Map<string, number>();
  readonly vocab: Record<FieldKey, Vocabulary> = {
    name: new Vocabulary(), description: new Vocabulary(),
    segmentId: new Vocabulary(), folderId: new Vocabulary(), folderLocation: new Vocabulary(), parentFolderId: new Vocabulary(),
  };
  /** Characters of text indexed (names and descriptions): the cache's measure of this index's size. */
  chars = 0;

  /** One past the highest slot: the length of a result's bitmap. */
  get capacity(): number {
    return this.slots.length;
  }

  get docCount(): number {
    return this.slotById.size;
  }

  slotOf(id: string): number | undefined {
    return this.slotById.get(id);
  }

  doc(slot: number): IndexedDoc | undefined {
    return this.slots[slot];
  }

  /** Every live slot, as a bitmap (1 = a document). */
  all(): Uint8Array {
    const out = new Uint8Array(this.slots.length);
    for (let s = 0; s < this.slots.length; s++) if (this.slots[s] !== undefined) out[s] = 1;
    return out;
  }

  /**
   * Make the index hold exactly `docs`: unchanged documents are kept, changed ones re-indexed,
   * missing ones dropped. Between documents, `pause` is awaited whenever `due()` says the slice
   * is over, so that a large first build never holds the event loop.
   */
  async sync(docs: readonly SearchDoc[], due: () => boolean, pause: () => Promise<void>): Promise<void> {
    const seen = new Set<string>();
    for (const doc of docs) {
      seen.add(doc.id);
      const slot = this.slotById.get(doc.id);
      const held = slot === undefined ? undefined : this.slots[slot];
      if (held !== undefined && same(held.doc, doc)) continue;
      if (slot !== undefined) this.remove(slot);
      this.add(doc);
      if (due()) await pause();
    }
    if (seen.size !== this.slotById.size) {
      for (const [id, slot] of [...this.slotById]) {
        if (seen.has(id)) continue;
        this.remove(slot);
        if (due()) await pause();
      }
    }
    for (const f of FIELDS) this.vocab[f].compact();
  }

  private add(doc: SearchDoc): void {
    const d = indexDoc({ ...doc });
    const slot = this.free.pop() ?? this.slots.length;
    this.slots[slot] = d;
    this.slotById.set(doc.id, slot);
    for (const f of FIELDS) for (const t of termsOf(d, f)) this.vocab[f].add(t, slot);
    this.chars += doc.name.length + doc.description.length;
  }

  private remove(slot: number): void {
    const d = this.slots[slot];
    if (d === undefined) return;
    for (const f of FIELDS) for (const t of termsOf(d, f)) this.vocab[f].remove(t, slot);
    this.slots[slot] = undefined;
    this.slotById.delete(d.doc.id);
    this.free.push(slot);
    this.chars -= d.doc.name.length + d.doc.description.length;
  }
}

function same(a: SearchDoc, b: SearchDoc): boolean {
  return a.name === b.name && a.description === b.description && a.namespace === b.namespace && a.parentFolderId === b.parentFolderId;
}

/**
 * Characters of names and descriptions the cache holds indexes for: ~8 bytes of heap each for
 * a vocabulary of distinct random words (measured: 2.29 M characters, 18.8 MB), less for prose.
 */
export const SEARCH_CACHE_CHARS = 16 * 1024 * 1024;

/**
 * The indexes of the sandboxes searched lately, least recently used dropped first once they hold
 * more than `maxChars` characters of text (the one in use is always kept). Each sandbox's searches
 * run one at a time (`exclusive`), so that a search never reads an index another is syncing.
 */
export class SearchIndexCache {
  private readonly entries = new Map<string, { index: SearchIndex; queue: Promise<unknown> }>();

  constructor(private readonly maxChars = SEARCH_CACHE_CHARS) {}

  async exclusive<T>(key: string, work: (index: SearchIndex) => Promise<T>): Promise<T> {
    let e = this.entries.get(key);
    if (e === undefined) e = { index: new SearchIndex(), queue: Promise.resolve() };
    this.entries.delete(key);
    this.entries.set(key, e);
    const entry = e;
    const run = entry.queue.then(() => work(entry.index));
    entry.queue = run.catch(() => undefined);
    try {
      return await run;
    } finally {
      this.evict(key);
    }
  }

  private evict(keep: string): void {
    let total = 0;
    for (const e of this.entries.values()) total += e.index.chars;
    for (const [key, e] of this.entries) {
      if (total <= this.maxChars) return;
      if (key === keep) continue;
      total -= e.index.chars;
      this.entries.delete(key);
    }
  }

  get size(): number {
    return this.entries.size;
  }
}
