/**
 * Whether an update's parsed fields all equal what the link already stores: such an update changes nothing (no
 * autofill, no new updatedDate), though the quota counts it like any successful update. A field is compared in
 * its stored form; where the two forms cannot be told equal cheaply (a new password, hashed with a fresh salt),
 * the update counts as a change.
 */
import { isDeepStrictEqual } from 'node:util'
import type { LinkSettings, PixelSpec } from './link-input.js'
import type { StoredLink } from './link-repository.js'

type Comparisons = { [K in keyof LinkSettings]: (link: StoredLink, value: LinkSettings[K]) => boolean }

function samePixels(link: StoredLink, pixels: PixelSpec[]): boolean {
  if (pixels.length !== link.pixels.length) return false
  return pixels.every((spec, index) => {
    const { pixel } = link.pixels[index]
    if ('id' in spec) return spec.id === pixel.id
    return spec.platform === pixel.platform && spec.value === pixel.value && spec.title === pixel.title
  })
}

const COMPARISONS: Comparisons = {
  url: (link, value) => link.url === value,
  title: (link, value) => link.title === value,
  description: (link, value) => link.description === value,
  image: (link, value) => link.image === value,
  favicon: (link, value) => link.favicon === value,
  note: (link, value) => link.note === value,
  folderId: (link, value) => link.folderId === value,
  showGDPR: (link, value) => link.showGDPR === value,
  deepLinkingEnable: (link, value) => link.deepLinkingEnable === value,
  linkScriptEnable: (link, value) => link.linkScriptEnable === value,
  masking: (link, value) => link.masking === value,
  tags: (link, value) => isDeepStrictEqual(link.tags, value),
  geolocations: (link, value) => isDeepStrictEqual(link.geolocations, value),
  rotator: (link, value) => isDeepStrictEqual(link.linkRotator, value),
  linkScripts: (link, value) => isDeepStrictEqual(link.linkScripts ?? null, value),
  pixels: samePixels,
  expiration: (link, value) =>
    value === null
      ? link.expirationEnable === null
      : link.expirationEnable === value.enable &&
        link.expiresAt?.getTime() === value.end.getTime() &&
        link.expirationUrl === value.url &&
        link.expirationTimezone === value.timezone,
  password: (link, value) =>
    value === null
      ? link.passwordEnable === null
      : link.passwordEnable === value.enable && (value.hash === undefined || link.passwordHash === value.hash),
}

export function changesNothing(link: StoredLink, changes: Partial<LinkSettings>): boolean {
  return (Object.keys(changes) as (keyof LinkSettings)[]).every((key) =>
    (COMPARISONS[key] as (link: StoredLink, value: unknown) => boolean)(link, changes[key]),
  )
}
