/** Reads the Prometheus text exposition format (0.0.4) as a scraper would: samples with their labels, and the types. */
export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

export interface Exposition {
  samples: Sample[]
  /** `# TYPE` of each metric family. */
  types: Map<string, string>
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: -?\d+)?$/
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/g

const unescape = (value: string) => value.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c))

function parseValue(text: string): number {
  if (text === '+Inf') return Infinity
  if (text === '-Inf') return -Infinity
  const value = Number(text)
  if (Number.isNaN(value) && text !== 'NaN' && text !== 'Nan') throw new Error(`not a sample value: ${text}`)
  return value
}

export function parseExposition(text: string): Exposition {
  const samples: Sample[] = []
  const types = new Map<string, string>()
  for (const line of text.split('\n')) {
    if (line === '') continue
    if (line.startsWith('#')) {
      const type = /^# TYPE (\S+) (\S+)$/.exec(line)
      if (type) types.set(type[1], type[2])
      else if (!line.startsWith('# HELP ')) throw new Error(`unexpected comment: ${line}`)
      continue
    }
    const match = SAMPLE.exec(line)
    if (!match) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    const labelText = match[2] ?? ''
    let consumed = 0
    for (const label of labelText.matchAll(LABEL)) {
      labels[label[1]] = unescape(label[2])
      consumed += label[0].length
    }
    if (consumed !== labelText.length) throw new Error(`bad labels: ${line}`)
    samples.push({ name: match[1], labels, value: parseValue(match[3]) })
  }
  return { samples, types }
}

/** The samples named `name` whose labels include `labels`. */
export function samplesOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): Sample[] {
  return exposition.samples.filter(
    (sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  )
}

/** The value of the one sample named `name` with exactly these labels (besides none), or undefined. */
export function valueOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): number | undefined {
  const found = exposition.samples.filter(
    (sample) =>
      sample.name === name &&
      Object.keys(sample.labels).length === Object.keys(labels).length &&
      Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  )
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} ${JSON.stringify(labels)}`)
  return found[0]?.value
}
