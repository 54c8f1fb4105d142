/**
 * The interstitial's one script. It is a constant (the same text on every page, whatever the link): it reads
 * what it needs from the page's JSON data block, so nothing a link holds is ever JavaScript source.
 *
 * Order: (consent, when asked) → each pixel's stub and init, its scripts → the workspace scripts → the
 * destination once everything has loaded (plus a short pause for the beacons) or after MAX_WAIT_MS,
 * whichever comes first → with deep linking, the app first and the web address when the page is still
 * showing 1.5 s later.
 */
import { PIXEL_TAGS } from './pixel-tags.js'

export const MAX_WAIT_MS = 1000
const SETTLE_MS = 250
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
  if (script.src && whenDone) script.onload = script.onerror = whenDone;
  d.body.appendChild(script);
  return Boolean(script.src);
}

function workspaceScript(snippet, track) {
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
    if (script.src) track(script);
    holders[i].parentNode.replaceChild(script, holders[i]);
  });
}

function start() {
  var pending = 0;
  var deadline = setTimeout(leave, ${MAX_WAIT_MS});
  // The pause for the beacons never runs past the deadline: whichever comes first leaves.
  function loaded() {
    if (--pending === 0) setTimeout(leave, ${SETTLE_MS});
  }
  function track(script) { pending++; script.onload = script.onerror = loaded }
  data.pixels.forEach(function (pixel) {
    var tag = TAGS[pixel.platform];
    try { tag.init(pixel.ids, w) } catch (e) {}
    var waiting = pixel.scripts.length;
    pixel.scripts.forEach(function (src) {
      pending++;
      addScript([{ name: 'src', value: src }, { name: 'async', value: '' }], '', function () {
        if (--waiting === 0 && tag.ready) { try { tag.ready(pixel.ids, w) } catch (e) {} }
        loaded();
      });
    });
  });
  data.scripts.forEach(function (snippet) {
    try { workspaceScript(snippet, track) } catch (e) {}
  });
  if (pending === 0) { clearTimeout(deadline); leave() }
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
