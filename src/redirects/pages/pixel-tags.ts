/**
 * Each platform's own standard tag, as its vendor publishes it: the script(s) to load, the queue stub and
 * init calls to run (JavaScript source that is a constant of this file: a pixel's value reaches it only as
 * the `ids` argument, read from the page's JSON data, never as source text), an optional noscript image,
 * and the hosts the page's Content-Security-Policy must allow for it (from the vendors' CSP guides).
 */

export interface PixelTag {
  /** What the consent banner calls it. */
  name: string
  /** The script URLs to load for the pixel ids of this platform on one page. */
  scripts(ids: string[]): string[]
  /** `function (ids, w) {…}` run before the scripts load: the vendor's queue stub and its init calls. */
  init: string
  /** `function (ids, w) {…}` run once the scripts have loaded (for a tag whose init needs the library). */
  ready?: string
  /** The vendor's <noscript> image for one id, when the standard tag has one. */
  noscriptImage?(id: string): string
  csp: { 'script-src': string[]; 'img-src': string[]; 'connect-src': string[]; 'frame-src'?: string[] }
}

const enc = encodeURIComponent

/**
 * gtag.js serves Google Analytics 4 and Google Ads alike: the same loader and the same stub, created once,
 * whichever comes first; each id is configured on it.
 */
const GTAG: Pick<PixelTag, 'scripts' | 'init'> = {
  scripts: (ids) => [`https://www.googletagmanager.com/gtag/js?id=${enc(ids[0])}`],
  init: `function (ids, w) {
    w.dataLayer = w.dataLayer || [];
    if (!w.gtag) { w.gtag = function () { w.dataLayer.push(arguments) }; w.gtag('js', new Date()) }
    ids.forEach(function (id) { w.gtag('config', id) });
  }`,
}

export const PIXEL_TAGS: Record<string, PixelTag> = {
  facebook: {
    name: 'Meta Pixel',
    scripts: () => ['https://connect.facebook.net/en_US/fbevents.js'],
    init: `function (ids, w) {
    if (!w.fbq) {
      var n = w.fbq = function () { n.callMethod ? n.callMethod.apply(n, arguments) : n.queue.push(arguments) };
      if (!w._fbq) w._fbq = n;
      n.push = n; n.loaded = true; n.version = '2.0'; n.queue = [];
    }
    ids.forEach(function (id) { w.fbq('init', id) });
    w.fbq('track', 'PageView');
  }`,
    noscriptImage: (id) => `https://www.facebook.com/tr?id=${enc(id)}&ev=PageView&noscript=1`,
    csp: {
      'script-src': ['https://connect.facebook.net'],
      'img-src': ['https://www.facebook.com'],
      'connect-src': ['https://www.facebook.com', 'https://connect.facebook.net'],
    },
  },
  ga: {
    name: 'Google Analytics',
    ...GTAG,
    // Google's CSP guide for GA4, with its Google Signals hosts (a property may turn them on at any time, and the
    // tag then beacons to them).
    csp: {
      'script-src': ['https://*.googletagmanager.com'],
      'img-src': ['https://*.google-analytics.com', 'https://*.googletagmanager.com', 'https://*.g.doubleclick.net', 'https://*.google.com'],
      'connect-src': [
        'https://*.google-analytics.com',
        'https://*.analytics.google.com',
        'https://*.googletagmanager.com',
        'https://*.g.doubleclick.net',
        'https://*.google.com',
      ],
    },
  },
  gtm: {
    name: 'Google Tag Manager',
    scripts: (ids) => ids.map((id) => `https://www.googletagmanager.com/gtm.js?id=${enc(id)}`),
    init: `function (ids, w) {
    w.dataLayer = w.dataLayer || [];
    w.dataLayer.push({ 'gtm.start': new Date().getTime(), event: 'gtm.js' });
  }`,
    // Google's CSP guide for the container; the tags a container loads are its own platforms' (add their pixels).
    csp: {
      'script-src': ['https://www.googletagmanager.com'],
      'img-src': ['https://www.googletagmanager.com'],
      'connect-src': ['https://www.googletagmanager.com', 'https://www.google.com'],
    },
  },
  adwords: {
    name: 'Google Ads',
    ...GTAG,
    csp: {
      'script-src': [
        'https://www.googletagmanager.com',
        'https://www.googleadservices.com',
        'https://www.google.com',
        'https://pagead2.googlesyndication.com',
        'https://googleads.g.doubleclick.net',
      ],
      'img-src': [
        'https://www.googletagmanager.com',
        'https://googleads.g.doubleclick.net',
        'https://www.google.com',
        'https://pagead2.googlesyndication.com',
      ],
      'connect-src': [
        'https://www.google.com',
        'https://googleads.g.doubleclick.net',
        'https://www.googleadservices.com',
        'https://pagead2.googlesyndication.com',
      ],
      'frame-src': ['https://td.doubleclick.net', 'https://bid.g.doubleclick.net', 'https://www.googletagmanager.com'],
    },
  },
  linkedin: {
    name: 'LinkedIn Insight',
    scripts: () => ['https://snap.licdn.com/li.lms-analytics/insight.min.js'],
    init: `function (ids, w) {
    w._linkedin_partner_id = ids[0];
    w._linkedin_data_partner_ids = w._linkedin_data_partner_ids || [];
    ids.forEach(function (id) { w._linkedin_data_partner_ids.push(id) });
    if (!w.lintrk) { w.lintrk = function (a, b) { w.lintrk.q.push([a, b]) }; w.lintrk.q = [] }
  }`,
    noscriptImage: (id) => `https://px.ads.linkedin.com/collect/?pid=${enc(id)}&fmt=gif`,
    csp: {
      'script-src': ['https://snap.licdn.com'],
      'img-src': ['https://px.ads.linkedin.com', 'https://px4.ads.linkedin.com'],
      'connect-src': ['https://px.ads.linkedin.com', 'https://px4.ads.linkedin.com'],
    },
  },
  twitter: {
    name: 'X (Twitter)',
    scripts: () => ['https://static.ads-twitter.com/uwt.js'],
    init: `function (ids, w) {
    if (!w.twq) {
      var s = w.twq = function () { s.exe ? s.exe.apply(s, arguments) : s.queue.push(arguments) };
      s.version = '1.1'; s.queue = [];
    }
    ids.forEach(function (id) { w.twq('config', id) });
  }`,
    csp: {
      'script-src': ['https://static.ads-twitter.com'],
      'img-src': ['https://t.co', 'https://analytics.twitter.com'],
      'connect-src': ['https://ads-twitter.com', 'https://ads-api.twitter.com', 'https://analytics.twitter.com'],
    },
  },
  pinterest: {
    name: 'Pinterest',
    scripts: () => ['https://s.pinimg.com/ct/core.js'],
    init: `function (ids, w) {
    if (!w.pintrk) {
      w.pintrk = function () { w.pintrk.queue.push(Array.prototype.slice.call(arguments)) };
      w.pintrk.queue = []; w.pintrk.version = '3.0';
    }
    ids.forEach(function (id) { w.pintrk('load', id) });
    w.pintrk('page');
  }`,
    noscriptImage: (id) => `https://ct.pinterest.com/v3/?event=init&tid=${enc(id)}&noscript=1`,
    csp: {
      'script-src': ['https://s.pinimg.com'],
      'img-src': ['https://ct.pinterest.com'],
      'connect-src': ['https://ct.pinterest.com'],
    },
  },
  quora: {
    name: 'Quora',
    scripts: () => ['https://a.quora.com/qevents.js'],
    init: `function (ids, w) {
    if (!w.qp) { var n = w.qp = function () { n.qp ? n.qp.apply(n, arguments) : n.queue.push(arguments) }; n.queue = [] }
    ids.forEach(function (id) { w.qp('init', id) });
    w.qp('track', 'ViewContent');
  }`,
    noscriptImage: (id) => `https://q.quora.com/_/ad/${enc(id)}/pixel?tag=ViewContent&noscript=1`,
    csp: {
      'script-src': ['https://a.quora.com'],
      'img-src': ['https://q.quora.com'],
      'connect-src': ['https://q.quora.com'],
    },
  },
  bing: {
    name: 'Microsoft Advertising (UET)',
    scripts: () => ['https://bat.bing.com/bat.js'],
    init: `function (ids, w) { w.uetq = w.uetq || [] }`,
    // UET's init needs its library: new UET({ti}) once bat.js has loaded; a second tag gets a queue of its own.
    ready: `function (ids, w) {
    if (typeof w.UET !== 'function') return;
    ids.forEach(function (id, i) {
      var name = i ? 'uetq' + i : 'uetq';
      var o = { ti: id, enableAutoSpaTracking: true };
      o.q = w[name] || [];
      w[name] = new w.UET(o);
      w[name].push('pageLoad');
    });
  }`,
    csp: {
      'script-src': ['https://bat.bing.com'],
      'img-src': ['https://bat.bing.com'],
      'connect-src': ['https://bat.bing.com'],
    },
  },
  adroll: {
    name: 'AdRoll',
    // The value is the advertiser id, optionally followed by the pixel id: "ADV_ID" or "ADV_ID/PIX_ID".
    scripts: (ids) => [`https://s.adroll.com/j/${enc(adrollIds(ids[0]).advertiser)}/roundtrip.js`],
    init: `function (ids, w) {
    var parts = String(ids[0]).split(/[\\/:,]/);
    w.adroll_adv_id = parts[0]; w.adroll_pix_id = parts[1] || ''; w.adroll_version = '2.0';
    w.__adroll_loaded = true;
    w.adroll = w.adroll || [];
    w.adroll.f = ['setProperties', 'identify', 'track'];
    w.adroll.f.forEach(function (n) { w.adroll[n] = w.adroll[n] || function () { w.adroll.push([n, arguments]) } });
    w.adroll.track('pageView');
  }`,
    csp: {
      'script-src': ['https://s.adroll.com'],
      'img-src': ['https://d.adroll.com'],
      'connect-src': ['https://d.adroll.com'],
    },
  },
  nexus: {
    name: 'Xandr (AppNexus)',
    scripts: () => ['https://acdn.adnxs.com/dmp/up/pixie.js'],
    init: `function (ids, w) {
    if (!w.pixie) {
      var n = w.pixie = function (e, i, a) { n.actionQueue.push({ action: e, actionValue: i, params: a }) };
      n.actionQueue = [];
    }
    ids.forEach(function (id) { w.pixie('init', id) });
    w.pixie('event', 'PageView');
  }`,
    noscriptImage: (id) => `https://ib.adnxs.com/pixie?pi=${enc(id)}&e=PageView&script=0`,
    csp: {
      'script-src': ['https://acdn.adnxs.com'],
      'img-src': ['https://ib.adnxs.com', 'https://secure.adnxs.com'],
      'connect-src': ['https://ib.adnxs.com'],
    },
  },
}

/** AdRoll needs two ids; a pixel holds one value: "ADV_ID/PIX_ID" (":" or "," also separate them). */
export function adrollIds(value: string): { advertiser: string; pixel: string } {
  const [advertiser, pixel = ''] = value.split(/[/:,]/)
  return { advertiser, pixel }
}

/** The pixels of a page grouped by platform (first-seen order), blank values and unknown platforms left out. */
export function pixelsByPlatform(pixels: { platform: string; value: string }[]): { platform: string; ids: string[] }[] {
  const groups = new Map<string, string[]>()
  for (const { platform, value } of pixels) {
    const id = value.trim()
    if (!id || !Object.hasOwn(PIXEL_TAGS, platform)) continue
    const ids = groups.get(platform) ?? []
    if (!ids.includes(id)) ids.push(id)
    groups.set(platform, ids)
  }
  return [...groups].map(([platform, ids]) => ({ platform, ids }))
}
