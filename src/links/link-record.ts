import type { LinkRecordBody } from '../../schemas/link.js'
import type { StoredLink } from './link-repository.js'

/** The flat record of contract section 3. The password hash never leaves the service. */
export function toLinkRecord(link: StoredLink): LinkRecordBody {
  return {
    uniq: link.uniq,
    id: link.slug,
    domain: link.domain,
    shortUrl: `https://${link.domain}/${link.slug}`,
    url: link.url,
    title: link.title,
    description: link.description,
    image: link.image,
    favicon: link.favicon,
    extraOptionsGeolocations: link.geolocations as LinkRecordBody['extraOptionsGeolocations'],
    extraOptionsLinkRotator: link.linkRotator as LinkRecordBody['extraOptionsLinkRotator'],
    folderId: link.folderId,
    pixels: link.pixels.map(({ pixel }) => ({
      id: pixel.id,
      platform: pixel.platform as LinkRecordBody['pixels'][number]['platform'],
      value: pixel.value,
      title: pixel.title,
      workspaceId: pixel.workspaceId,
      createdAt: pixel.createdAt.toISOString(),
    })),
    showGDPR: link.showGDPR,
    tags: link.tags,
    note: link.note,
    deepLinkingEnable: link.deepLinkingEnable,
    linkScripts: (link.linkScripts as number[] | null) ?? null,
    linkScriptEnable: link.linkScriptEnable,
    masking: link.masking,
    linkExpiration:
      link.expirationEnable === null
        ? null
        : {
            enable: link.expirationEnable,
            end: link.expiresAt!.toISOString(),
            url: link.expirationUrl!,
            timezone: link.expirationTimezone!,
          },
    passwordProtect: link.passwordEnable === null ? null : { enable: link.passwordEnable },
    workspaceId: link.workspaceId,
    createdDate: link.createdAt.toISOString(),
    updatedDate: link.updatedAt.toISOString(),
  }
}
