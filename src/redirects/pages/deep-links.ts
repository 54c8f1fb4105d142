/**
 * Deep linking: which phone a visitor holds, and the address that opens a destination in its app.
 * Android gets an intent:// URL with the app's package and the web address as Chrome's own fallback
 * (S.browser_fallback_url); the app opens the same https address it would handle from any link. iOS gets
 * the app's URL scheme, in the form each app is known to accept; where no such form exists for the kind of
 * address (an Instagram post, say), there is no deep link and the visitor is redirected as usual.
 */
import type { AppLink, PhoneOs } from './types.js'

/**
 * 'ios' for an iPhone or iPod, 'android' for an Android phone (Android browsers put "Mobile" in phones'
 * User-Agents, not tablets'), else null. Tablets count as desktops: an iPad on iPadOS 13+ says it is a Mac
 * anyway, and the apps' tablet versions are not worth a detour. Windows Phone's UA names Android and iPhone
 * for compatibility; it is not either.
 */
export function phoneOs(userAgent: string | undefined): PhoneOs | null {
  if (!userAgent || /Windows Phone|IEMobile/i.test(userAgent)) return null
  if (/\b(iPhone|iPod)\b/.test(userAgent)) return 'ios'
  if (/\bAndroid\b/i.test(userAgent) && /\bMobile\b/.test(userAgent)) return 'android'
  return null
}

interface App {
  name: string
  hosts: RegExp
  androidPackage: string
  /** The iOS URL-scheme address for this web address, or null when the app has no form for it. */
  ios(url: URL): string | null
}

const segments = (url: URL) => url.pathname.split('/').filter(Boolean).map(decodeURIComponent)
const schemeOf = (scheme: string, url: URL) => `${scheme}://${url.host}${url.pathname}${url.search}`

const APPS: App[] = [
  {
    name: 'YouTube',
    hosts: /^(www\.|m\.|music\.)?youtube\.com$|^youtu\.be$/,
    androidPackage: 'com.google.android.youtube',
    ios: (url) => {
      if (url.hostname === 'youtu.be') {
        const [id] = segments(url)
        if (!id) return 'youtube://'
        // The short form's parameters (t=42, the visit's utm_*) go along, after the video's own v.
        const query = new URLSearchParams([['v', id], ...[...url.searchParams].filter(([name]) => name !== 'v')])
        return `youtube://www.youtube.com/watch?${query}`
      }
      return schemeOf('youtube', url)
    },
  },
  {
    name: 'Instagram',
    hosts: /^(www\.)?instagram\.com$/,
    androidPackage: 'com.instagram.android',
    ios: (url) => {
      const [first, second, third] = segments(url)
      if (!first) return 'instagram://app'
      if (first === 'explore' && second === 'tags' && third) return `instagram://tag?name=${encodeURIComponent(third)}`
      const reserved = ['p', 'reel', 'reels', 'tv', 'stories', 'explore', 'accounts', 'direct']
      if (!second && !reserved.includes(first)) return `instagram://user?username=${encodeURIComponent(first)}`
      return null
    },
  },
  {
    name: 'Facebook',
    hosts: /^((www|m|web|business)\.)?facebook\.com$|^fb\.(com|watch|me)$/,
    androidPackage: 'com.facebook.katana',
    // The app's web view for any facebook.com address.
    ios: (url) => `fb://facewebmodal/f?href=${encodeURIComponent(url.href)}`,
  },
  {
    name: 'X',
    hosts: /^((www|mobile)\.)?(twitter|x)\.com$/,
    androidPackage: 'com.twitter.android',
    ios: (url) => {
      const [user, kind, id] = segments(url)
      if (user && kind === 'status' && id && /^\d+$/.test(id)) return `twitter://status?id=${id}`
      if (user && !kind && /^\w{1,15}$/.test(user) && !['home', 'explore', 'search', 'i'].includes(user)) {
        return `twitter://user?screen_name=${user}`
      }
      return user ? null : 'twitter://timeline'
    },
  },
  {
    name: 'LinkedIn',
    hosts: /^([a-z]{2,3}\.|www\.)?linkedin\.com$/,
    androidPackage: 'com.linkedin.android',
    ios: (url) => {
      const [kind, name] = segments(url)
      if ((kind === 'in' || kind === 'company') && name) return `linkedin://${kind}/${encodeURIComponent(name)}`
      return kind ? null : 'linkedin://'
    },
  },
  {
    name: 'TikTok',
    hosts: /^(www\.|m\.)?tiktok\.com$/,
    androidPackage: 'com.zhiliaoapp.musically',
    ios: (url) => {
      const [user, kind, id] = segments(url)
      if (user?.startsWith('@') && kind === 'video' && id && /^\d+$/.test(id)) return `snssdk1233://aweme/detail/${id}`
      return user ? null : 'snssdk1233://'
    },
  },
  {
    name: 'Spotify',
    hosts: /^open\.spotify\.com$/,
    androidPackage: 'com.spotify.music',
    // open.spotify.com/(intl-xx/)<type>/<id> is the Spotify URI spotify:<type>:<id>.
    ios: (url) => {
      const parts = segments(url).filter((part) => !/^intl-/.test(part))
      const [type, id] = parts
      const types = ['track', 'album', 'artist', 'playlist', 'episode', 'show', 'user']
      if (types.includes(type) && id && /^[\w.-]+$/.test(id)) return `spotify:${type}:${id}`
      return type ? null : 'spotify:'
    },
  },
  {
    name: 'Amazon',
    hosts: /^(www\.|smile\.)?amazon\.(com|ca|com\.mx|com\.br|co\.uk|de|fr|it|es|nl|se|pl|com\.be|com\.tr|ae|sa|in|co\.jp|com\.au|sg|eg)$/,
    androidPackage: 'com.amazon.mShop.android.shopping',
    ios: (url) => schemeOf('com.amazon.mobile.shopping.web', url),
  },
]

const APP_SCHEMES = ['youtube', 'instagram', 'fb', 'twitter', 'linkedin', 'snssdk1233', 'spotify', 'com.amazon.mobile.shopping.web', 'intent']

/** Whether a URL is one of the app addresses appLinkFor makes: the only non-http(s) URLs a page may link to. */
export function isAppUrl(url: string): boolean {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1].toLowerCase()
  return scheme !== undefined && APP_SCHEMES.includes(scheme)
}

export function appLinkFor(destination: string, os: PhoneOs): AppLink | null {
  let url: URL
  try {
    url = new URL(destination)
  } catch {
    return null
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return null
  const app = APPS.find((candidate) => candidate.hosts.test(url.hostname))
  if (!app) return null
  const fallback = url.href
  if (os === 'ios') {
    let appUrl: string | null
    try {
      appUrl = app.ios(url)
    } catch {
      appUrl = null // a malformed %-escape in the path
    }
    return appUrl ? { app: app.name, url: appUrl, fallback } : null
  }
  // The fragment is the intent's own syntax, so the address's own #fragment cannot come along.
  const target = `${url.host}${url.pathname}${url.search}`
  const intent = `intent://${target}#Intent;scheme=https;package=${app.androidPackage};S.browser_fallback_url=${encodeURIComponent(fallback)};end`
  return { app: app.name, url: intent, fallback }
}
