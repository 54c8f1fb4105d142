/** Deep linking: phoneOs on real User-Agent strings, and the app address for each app on iOS and Android. */
import t from 'tap'
import { appLinkFor, phoneOs } from '../../../src/redirects/pages/index.js'
import { isAppUrl } from '../../../src/redirects/pages/deep-links.js'

const USER_AGENTS: [string, string, 'ios' | 'android' | null][] = [
  ['iPhone Safari', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1', 'ios'],
  ['iPhone Chrome', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/126.0.6478.54 Mobile/15E148 Safari/604.1', 'ios'],
  ['Instagram in-app browser on iPhone', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 330.0.0.33.109 (iPhone15,2; iOS 17_4; en_US; en; scale=3.00; 1179x2556; 598862434)', 'ios'],
  ['iPod touch', 'Mozilla/5.0 (iPod touch; CPU iPhone OS 15_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/15.6 Mobile/15E148 Safari/604.1', 'ios'],
  ['Android Chrome phone', 'Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36', 'android'],
  ['Samsung Internet', 'Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S921B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36', 'android'],
  ['Firefox on an Android phone', 'Mozilla/5.0 (Android 14; Mobile; rv:127.0) Gecko/127.0 Firefox/127.0', 'android'],
  ['Facebook in-app browser on Android', 'Mozilla/5.0 (Linux; Android 13; Pixel 7 Build/TQ3A.230901.001; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/116.0.5845.163 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/431.0.0.31.111;]', 'android'],
  ['iPad Safari', 'Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1', null],
  ['iPadOS 13+ (asks for the desktop site)', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15', null],
  ['Android tablet Chrome', 'Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36', null],
  ['Firefox on an Android tablet', 'Mozilla/5.0 (Android 14; Tablet; rv:127.0) Gecko/127.0 Firefox/127.0', null],
  ['Windows Phone (names Android and iPhone)', 'Mozilla/5.0 (Windows Phone 10.0; Android 6.0.1; Microsoft; Lumia 950) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/52.0.2743.116 Mobile Safari/537.36 Edge/15.15063', null],
  ['Windows Chrome', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36', null],
  ['Linux Firefox', 'Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0', null],
  ['curl', 'curl/8.5.0', null],
  ['empty', '', null],
]

t.test('phoneOs: iPhone and iPod are ios, Android phones are android, tablets and the rest are desktops', async (t) => {
  for (const [name, userAgent, expected] of USER_AGENTS) t.equal(phoneOs(userAgent), expected, name)
  t.equal(phoneOs(undefined), null, 'no User-Agent')
})

const fallbackOf = (intent: string) => decodeURIComponent(/S\.browser_fallback_url=([^;]+);/.exec(intent)![1])

/** The eight apps: a destination each, the iOS address and the Android package. */
const APPS: [string, string, string, string][] = [
  ['YouTube', 'https://www.youtube.com/watch?v=dQw4w9WgXcQ', 'youtube://www.youtube.com/watch?v=dQw4w9WgXcQ', 'com.google.android.youtube'],
  ['Instagram', 'https://www.instagram.com/nasa/', 'instagram://user?username=nasa', 'com.instagram.android'],
  ['Facebook', 'https://www.facebook.com/NASA', 'fb://facewebmodal/f?href=https%3A%2F%2Fwww.facebook.com%2FNASA', 'com.facebook.katana'],
  ['X', 'https://x.com/NASA/status/1790000000000000000', 'twitter://status?id=1790000000000000000', 'com.twitter.android'],
  ['LinkedIn', 'https://www.linkedin.com/in/satyanadella', 'linkedin://in/satyanadella', 'com.linkedin.android'],
  ['TikTok', 'https://www.tiktok.com/@nasa/video/7300000000000000000', 'snssdk1233://aweme/detail/7300000000000000000', 'com.zhiliaoapp.musically'],
  ['Spotify', 'https://open.spotify.com/track/4cOdK2wGLETKBW3PvgPWqT?si=abc', 'spotify:track:4cOdK2wGLETKBW3PvgPWqT', 'com.spotify.music'],
  ['Amazon', 'https://www.amazon.com/dp/B08N5WRWNW?tag=acme-20', 'com.amazon.mobile.shopping.web://www.amazon.com/dp/B08N5WRWNW?tag=acme-20', 'com.amazon.mShop.android.shopping'],
]

for (const [app, destination, iosUrl, androidPackage] of APPS) {
  t.test(`${app}: its URL scheme on iOS, an intent with its package on Android, the web address as fallback`, async (t) => {
    t.same(appLinkFor(destination, 'ios'), { app, url: iosUrl, fallback: destination })
    const android = appLinkFor(destination, 'android')!
    t.equal(android.app, app)
    t.equal(android.fallback, destination)
    const web = new URL(destination)
    t.equal(
      android.url,
      `intent://${web.host}${web.pathname}${web.search}#Intent;scheme=https;package=${androidPackage};S.browser_fallback_url=${encodeURIComponent(destination)};end`,
    )
    t.equal(fallbackOf(android.url), destination)
    t.ok(isAppUrl(iosUrl) && isAppUrl(android.url), 'both are app addresses a page may link to')
  })
}

t.test('other shapes of the apps’ addresses', async (t) => {
  const ios = (url: string) => appLinkFor(url, 'ios')?.url ?? null
  t.equal(ios('https://youtu.be/dQw4w9WgXcQ?t=42&utm_source=mail'), 'youtube://www.youtube.com/watch?v=dQw4w9WgXcQ&t=42&utm_source=mail', 'the parameters go along')
  t.equal(ios('https://youtu.be/dQw4w9WgXcQ'), 'youtube://www.youtube.com/watch?v=dQw4w9WgXcQ')
  t.equal(ios('https://youtu.be/dQw4w9WgXcQ?v=other'), 'youtube://www.youtube.com/watch?v=dQw4w9WgXcQ', "the path's video wins")
  t.equal(ios('https://m.youtube.com/@nasa'), 'youtube://m.youtube.com/@nasa')
  t.equal(ios('https://instagram.com/explore/tags/space/'), 'instagram://tag?name=space')
  t.equal(ios('https://www.instagram.com/p/C8abcdEF/'), null, 'no app form for a post: a plain redirect')
  t.equal(ios('https://twitter.com/NASA'), 'twitter://user?screen_name=NASA')
  t.equal(ios('https://www.linkedin.com/company/microsoft/'), 'linkedin://company/microsoft')
  t.equal(ios('https://de.linkedin.com/in/someone'), 'linkedin://in/someone')
  t.equal(ios('https://open.spotify.com/intl-de/album/1DFixLWuPkv3KT3TnV35m3'), 'spotify:album:1DFixLWuPkv3KT3TnV35m3')
  t.equal(ios('https://open.spotify.com/playlist/37i9dQZF1DXcBWIGoYBM5M'), 'spotify:playlist:37i9dQZF1DXcBWIGoYBM5M')
  t.equal(ios('https://www.amazon.de/gp/product/B08N5WRWNW'), 'com.amazon.mobile.shopping.web://www.amazon.de/gp/product/B08N5WRWNW')
  t.equal(ios('https://m.facebook.com/events/123'), 'fb://facewebmodal/f?href=https%3A%2F%2Fm.facebook.com%2Fevents%2F123')
  t.equal(ios('https://www.instagram.com/%E0%A4%A/'), null, 'a malformed escape is no deep link, not an error')
  t.match(appLinkFor('https://www.instagram.com/p/C8abcdEF/', 'android')?.url, /^intent:\/\/www\.instagram\.com\/p\/C8abcdEF\/#Intent;/, 'Android opens any address in the app')
  t.match(appLinkFor('http://youtube.com/watch?v=x#t=1', 'android')?.url, /^intent:\/\/youtube\.com\/watch\?v=x#Intent;scheme=https;/, 'the fragment cannot come along')
})

t.test('addresses of no known app have no deep link', async (t) => {
  for (const url of ['https://example.com/', 'https://notyoutube.com/watch?v=x', 'https://youtube.com.evil.example/', 'https://amazon.evil/',
    'https://spotify.com/track/x', 'javascript:alert(1)', 'not a url']) {
    t.equal(appLinkFor(url, 'ios'), null, `${url} (ios)`)
    t.equal(appLinkFor(url, 'android'), null, `${url} (android)`)
  }
})
