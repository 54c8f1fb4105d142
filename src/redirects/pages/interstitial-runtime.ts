/**
 * The interstitial's one script. It is a constant (the same text on every page, whatever the link): it reads
 * what it needs from the page's JSON data block, so nothing a link holds is ever JavaScript source.
 *
 * Order: (consent, when asked) → each pixel's stub and init, its scripts → the workspace scripts → the
 * destination once the page has gone quiet, or after MAX_WAIT_MS, whichever comes first → with deep linking, the
 * app first and the web address when the page is still showing 1.5 s later.
 *
 * "Quiet": every script with a `src` in the page has loaded or failed (those a vendor's loader or a workspace
 * snippet adds are seen by a MutationObserver), and no request of the page has ended for QUIET_MS (the
 * PerformanceObserver sees each image, fetch or script end). Tags load in steps (a loader, its library, then a
 * beacon), and a beacon still on its way when the page leaves is cut off: leaving as soon as our own scripts had
 * loaded lost them.
 */
import { PIXEL_TAGS } from './pixel-tags.js'

export const MAX_WAIT_MS = 1000
const QUIET_MS = 400
const APP_FALLBACK_MS = 1500

const tagFunctions = Object.entries(PIXEL_TAGS)
  .map(([platform, tag]) => `  ${JSON.stringify(platform)}: { init: ${tag.init}, ready: ${tag.ready ?? 'null'} }`)
  .join(',\n')

export const INTERSTITIAL_SCRIPT = `(function () {
'use strict';
var w = window, d = document;
var nonce = d.currentScript && d.currentScript.nonce;
var data = JSON.parse(d.getElementById('page-data').textContent);
var TAGS = {
${tagFunctions}
};
var left = false;

function leave() {
  if (left) return;
  left = true;
  var app = data.appLink;
  if (!app) {
    if (data.destination) w.location.replace(data.destination);
    return;
  }
  var tried = Date.now();
  w.location.href = app.url;
  // Still here and not backgrounded by the app: the app is not installed, so the web address it is.
  setTimeout(function () {
    if (!d.hidden && Date.now() - tried < ${APP_FALLBACK_MS * 2}) w.location.replace(app.fallback);
  }, ${APP_FALLBACK_MS});
}

function addScript(attributes, text, whenDone) {
  var script = d.createElement('script');
  for (var i = 0; i < attributes.length; i++) script.setAttribute(attributes[i].name, attributes[i].value);
  if (nonce) script.nonce = nonce;
  if (text) script.text = text;
  if (script.src && whenDone) { script.addEventListener('load', whenDone); script.addEventListener('error', whenDone) }
  d.body.appendChild(script);
}

function workspaceScript(snippet) {
  if (snippet.kind === 'js') return addScript([], snippet.content, null);
  var fragment = d.createRange().createContextualFragment(snippet.content);
  // Scripts are re-created so that each one carries the page's nonce and runs once inserted.
  var scripts = Array.prototype.slice.call(fragment.querySelectorAll('script'));
  var holders = scripts.map(function (old) {
    var holder = d.createComment('script');
    old.parentNode.replaceChild(holder, old);
    return holder;
  });
  d.body.appendChild(fragment);
  scripts.forEach(function (old, i) {
    var script = d.createElement('script');
    for (var a = 0; a < old.attributes.length; a++) script.setAttribute(old.attributes[a].name, old.attributes[a].value);
    if (nonce) script.nonce = nonce;
    script.text = old.text;
    holders[i].parentNode.replaceChild(script, holders[i]);
  });
}

function start() {
  if (data.pixels.length === 0 && data.scripts.length === 0) return leave();
  var pending = 0;
  var quiet = null;
  var tracked = typeof WeakSet === 'function' ? new WeakSet() : null;
  setTimeout(leave, ${MAX_WAIT_MS});
  // Called whenever something ends: the quiet period starts again once no script is loading.
  function settle() {
    clearTimeout(quiet);
    if (pending === 0) quiet = setTimeout(leave, ${QUIET_MS});
  }
  function track(script) {
    if (!script.src || (tracked && tracked.has(script))) return;
    if (tracked) tracked.add(script);
    pending++;
    clearTimeout(quiet);
    var ended = false;
    function end() { if (!ended) { ended = true; pending--; settle() } }
    script.addEventListener('load', end);
    script.addEventListener('error', end);
  }
  function trackAdded(records) {
    records.forEach(function (record) {
      Array.prototype.forEach.call(record.addedNodes, function (node) {
        if (node.nodeName === 'SCRIPT') track(node);
        else if (node.querySelectorAll) Array.prototype.forEach.call(node.querySelectorAll('script'), track);
      });
    });
  }
  var watcher = w.MutationObserver ? new MutationObserver(trackAdded) : null;
  if (watcher) watcher.observe(d.documentElement, { childList: true, subtree: true });
  try { new PerformanceObserver(settle).observe({ type: 'resource' }) } catch (e) {}
  data.pixels.forEach(function (pixel) {
    var tag = TAGS[pixel.platform];
    try { tag.init(pixel.ids, w) } catch (e) {}
    var waiting = pixel.scripts.length;
    pixel.scripts.forEach(function (src) {
      addScript([{ name: 'src', value: src }, { name: 'async', value: '' }], '', function () {
        if (--waiting === 0 && tag.ready) { try { tag.ready(pixel.ids, w) } catch (e) {} }
      });
    });
  });
  data.scripts.forEach(function (snippet) {
    try { workspaceScript(snippet) } catch (e) {}
  });
  // What was added so far, at once (the observer reports later): then the first quiet period.
  if (watcher) trackAdded(watcher.takeRecords());
  settle();
}

if (!data.consent) return start();
var banner = d.getElementById('consent');
var progress = d.getElementById('progress');
var accept = d.getElementById('accept');
accept.hidden = false;
accept.addEventListener('click', function () {
  banner.hidden = true;
  progress.hidden = false;
  start();
});
d.getElementById('decline').addEventListener('click', function (event) {
  event.preventDefault();
  banner.hidden = true;
  progress.hidden = false;
  leave();
});
})();
`
