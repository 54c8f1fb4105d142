/** Reading a rendered page the way a browser would (parse5 is a spec-compliant HTML parser). */
import { parse } from 'parse5'

export interface Element {
  tag: string
  attrs: Record<string, string>
  text: string
  /** Tags of the ancestors, nearest first. */
  ancestors: string[]
}

interface Node {
  nodeName: string
  tagName?: string
  attrs?: { name: string; value: string }[]
  childNodes?: Node[]
  content?: Node
  value?: string
}

function textOf(node: Node): string {
  if (node.nodeName === '#text') return node.value ?? ''
  return (node.childNodes ?? []).map(textOf).join('')
}

/**
 * Every element of the document in order, as the parser built it; `scripting: false` parses it as a browser
 * without JavaScript does (the content of <noscript> becomes elements).
 */
export function elements(html: string, options: { scripting?: boolean } = {}): Element[] {
  const out: Element[] = []
  const walk = (node: Node, ancestors: string[]) => {
    for (const child of node.childNodes ?? []) {
      if (!child.tagName) continue
      const attrs = Object.fromEntries((child.attrs ?? []).map(({ name, value }) => [name, value]))
      out.push({ tag: child.tagName, attrs, text: textOf(child), ancestors })
      walk(child, [child.tagName, ...ancestors])
    }
  }
  walk(parse(html, { scriptingEnabled: options.scripting ?? true }) as unknown as Node, [])
  return out
}

export const byTag = (html: string, tag: string, options: { scripting?: boolean } = {}) =>
  elements(html, options).filter((element) => element.tag === tag)

export function meta(html: string, key: string): string | undefined {
  return byTag(html, 'meta').find((m) => m.attrs.property === key || m.attrs.name === key)?.attrs.content
}

/** A CSP string as directive → sources. */
export function parseCsp(csp: string): Record<string, string[]> {
  return Object.fromEntries(
    csp.split(';').map((part) => part.trim().split(/\s+/)).filter((parts) => parts[0]).map(([name, ...sources]) => [name, sources]),
  )
}

/** What an injection would leave behind: script elements, event-handler attributes, script URLs. */
export function activeContent(html: string) {
  const all = [...elements(html), ...elements(html, { scripting: false })]
  return {
    scripts: all.filter((element) => element.tag === 'script'),
    handlers: all.flatMap((element) => Object.keys(element.attrs).filter((name) => /^on/i.test(name))),
    scriptUrls: all.flatMap((element) =>
      ['href', 'src', 'action', 'formaction', 'content'].map((name) => element.attrs[name]).filter((value) => value && /javascript:/i.test(value)),
    ),
  }
}
