// edgeq console: one stream of /v1/status snapshots (Server-Sent Events read
// with fetch, so that a bearer token can go in a header), drawn into the page.
// Rates are counter deltas between two snapshots over the node's own clock.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const KEEP = 120; // points per plotted series (2 minutes at 1 s)
  const TOKEN_KEY = 'edgeq-token';
  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  let prev = null;
  let retryTimer = 0;
  const MIN_SLOTS = 30; // a plot spans at least this many points: it fills in the first half-minute
  const hist = { t: [], in: [], out: [], cpu: [], temp: [], mem: [], disk: [], rss: [], load: [] };

  // ---- DOM helpers (text only: nothing from the node is parsed as HTML) ----
  const SVG = 'http://www.w3.org/2000/svg';
  function h(tag, attrs, ...kids) {
    const svg = tag === 'svg' || tag === 'path' || tag === 'rect';
    const el = svg ? document.createElementNS(SVG, tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') el.textContent = v;
      else if (k === 'class' && !svg) el.className = v;
      else el.setAttribute(k, v);
    }
    for (const kid of kids) {
      if (kid === null || kid === undefined) continue;
      el.append(kid instanceof Node ? kid : String(kid));
    }
    return el;
  }
  const td = (v, cls) => h('td', { class: cls, text: v });
  function fill(tbody, rows, empty, cols) {
    tbody.replaceChildren(...(rows.length ? rows : [h('tr', {}, h('td', { class: 'txt muted empty', colspan: cols, text: empty }))]));
  }

  // ---- formatting ----
  const num = (n) => (n === undefined || n === null ? '–' : Number(n).toLocaleString('en-US'));
  const rate = (r) => (r === null || r === undefined ? '–' : r >= 100 ? Math.round(r).toLocaleString('en-US') : r.toFixed(1));
  const ms = (v) => (!v ? '–' : v >= 1000 ? (v / 1000).toFixed(2) + ' s' : v >= 10 ? Math.round(v) + ' ms' : v.toFixed(1) + ' ms');
  function bytes(n) {
    if (n === undefined || n === null) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + ' ' + u[i];
  }
  function ago(sec) {
    sec = Math.max(0, Math.round(sec));
    if (sec < 60) return sec + 's';
    if (sec < 3600) return Math.floor(sec / 60) + 'm' + (sec % 60 ? ' ' + (sec % 60) + 's' : '');
    if (sec < 86400) return Math.floor(sec / 3600) + 'h ' + Math.floor((sec % 3600) / 60) + 'm';
    return Math.floor(sec / 86400) + 'd ' + Math.floor((sec % 86400) / 3600) + 'h';
  }
  const level = (v, warn, bad) => (v === null || v === undefined ? '' : v >= bad ? 'bad' : v >= warn ? 'warn' : '');
  const chip = (text, cls) => h('span', { class: 'chip ' + (cls || ''), text });
  function push(series, v) {
    if (v === null || v === undefined || !isFinite(v)) return;
    series.push(v);
    if (series.length > KEEP) series.shift();
  }
  // path draws a series into a w×hgt box, scaled to [0, top], the newest
  // point at the right edge and slots points across.
  function path(series, w, hgt, top, slots) {
    if (!series.length) return '';
    const step = w / (Math.max(slots, 2) - 1);
    const x0 = w - step * (series.length - 1);
    return series.map((v, i) => (i ? 'L' : 'M') + (x0 + i * step).toFixed(1) + ' ' + (hgt - (v / top) * (hgt - 2) - 1).toFixed(1)).join('');
  }
  function sparkline(series) {
    const lo = Math.min(...series, Infinity), hi = Math.max(...series, -Infinity);
    const span = hi - lo || Math.abs(hi) || 1;
    const scaled = series.map((v) => v - lo + span * 0.1);
    return h('svg', { viewBox: '0 0 100 26', preserveAspectRatio: 'none' }, h('path', { d: path(scaled, 100, 26, span * 1.2, series.length) }));
  }

  // ---- the stream ----
  const authHeaders = () => (token ? { Authorization: 'Bearer ' + token } : {});
  function setLive(on, text) {
    $('live').classList.toggle('off', !on);
    $('live-text').textContent = text;
  }
  function retry(after) {
    setLive(false, 'reconnecting');
    clearTimeout(retryTimer);
    retryTimer = setTimeout(connect, after || 2000);
  }
  async function connect() {
    clearTimeout(retryTimer);
    setLive(false, 'connecting');
    let res;
    try {
      res = await fetch('/v1/events', { headers: authHeaders(), cache: 'no-store' });
    } catch (e) {
      return retry();
    }
    if (res.status === 401) return askToken(refusal());
    if (res.status === 503) return poll(); // too many open streams: poll instead
    if (!res.ok || !res.body) return retry();
    setLive(true, 'live');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          onEvent(buf.slice(0, i));
          buf = buf.slice(i + 2);
        }
        if (buf.length > 16 << 20) break; // not an event stream
      }
    } catch (e) {
      // the connection dropped: reconnect below
    }
    retry();
  }
  function onEvent(block) {
    let name = 'message', data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('event:')) name = line.slice(6).trim();
      else if (line.startsWith('data:')) data += line.slice(5).replace(/^ /, '');
    }
    if (name === 'status' && data) render(JSON.parse(data));
  }
  async function poll() {
    setLive(true, 'polling');
    try {
      const res = await fetch('/v1/status', { headers: authHeaders(), cache: 'no-store' });
      if (res.status === 401) return askToken(refusal());
      if (res.ok) render(await res.json());
    } catch (e) {
      setLive(false, 'unreachable');
    }
    retryTimer = setTimeout(connect, 2000); // try the stream again
  }
  const refusal = () => (token ? 'Wrong token: the node refused it (401).' : '');
  function askToken(message) {
    setLive(false, 'token needed');
    const err = $('login-error');
    err.textContent = message;
    err.hidden = !message;
    const dlg = $('login');
    if (!dlg.open) dlg.showModal();
    $('token').focus();
  }
  $('login-form').addEventListener('submit', () => {
    token = $('token').value.trim();
    sessionStorage.setItem(TOKEN_KEY, token);
    $('token').value = '';
    connect();
  });

  // ---- drawing ----
  function render(st) {
    const dt = prev && prev.node === st.node ? (Date.parse(st.time) - Date.parse(prev.time)) / 1000 : 0;
    const delta = (a, b) => (dt > 0 && a !== undefined && b >= a ? (b - a) / dt : null);
    header(st);
    document.body.classList.toggle('clustered', !!st.cluster);
    const groups = st.groups || [];
    const ingest = Object.values(st.sources || {}).reduce((s, c) => s + c.msgs, 0);
    const delivered = groups.reduce((s, g) => s + (g.leading ? g.delivered : 0), 0);
    if (prev) {
      const pin = Object.values(prev.sources || {}).reduce((s, c) => s + c.msgs, 0);
      const pout = (prev.groups || []).reduce((s, g) => s + (g.leading ? g.delivered : 0), 0);
      const rin = delta(pin, ingest), rout = delta(pout, delivered);
      if (rin !== null && rout !== null) {
        push(hist.t, Date.parse(st.time));
        push(hist.in, rin);
        push(hist.out, rout);
      }
    }
    figures(st, groups);
    plot();
    health(st, dt);
    groupTable(st, groups, delta);
    bridgeTable(st, delta);
    deviceTable(st);
    partitionTable(st, delta);
    cluster(st);
    connections(st, delta);
    $('footer').textContent = 'snapshot ' + new Date(st.time).toLocaleTimeString() + ' · data ' + (st.data_dir || '') + ' · nats ' + (st.nats || '') + ' · durability ' + (st.durability || '');
    prev = st;
  }

  function header(st) {
    const ready = st.ready ? chip('ready') : chip('not ready', 'bad');
    $('node').replaceChildren(h('b', { text: st.node }), ' ', ready, '  v' + st.version + ' · up ' + ago(st.uptime_seconds));
  }

  function figures(st, groups) {
    const lead = groups.filter((g) => g.leading);
    // Devices sending: the devices that published to this node within the
    // hot-device detector's sliding window (hot.window, 10s), as /v1/status
    // counts them in hot.tracked. A group's active_devices is something
    // else (devices with unfinished messages in it, often 0 while workers
    // keep up), shown below it for the group in the worst state; the terms
    // are defined in docs/glossary.md.
    const hs = st.hot || {};
    let waiting = 0, waitingOf = '';
    for (const g of lead) if (g.active_devices > waiting) { waiting = g.active_devices; waitingOf = g.queue; }
    const log = st.log || {};
    const sub = [hs.enabled ? 'published to this node within 1–2 × hot.window' : 'not counted: hot isolation is off'];
    if (waitingOf) sub.push(num(waiting) + ' with unfinished messages in ' + waitingOf);
    sub.push(num(log.devices) + ' known of ' + num(log.max_devices));
    setFigure('fig-active', hs.enabled ? num(hs.tracked) : '–', sub.join(' · '),
      log.max_devices ? level(log.devices / log.max_devices, 0.8, 0.95) : '');
    let p99 = 0, p99of = '';
    for (const g of lead) if (g.latency_p99_ms > p99) { p99 = g.latency_p99_ms; p99of = g.queue; }
    setFigure('fig-p99', ms(p99), p99of ? 'ingest → delivery, last minute, ' + p99of : 'no deliveries in the last minute', level(p99, 1000, 5000));
    let span = 0, spanOf = '';
    for (const g of lead) {
      for (const [p, v] of Object.entries(g.window_span || {})) if (v > span) { span = v; spanOf = g.queue + ' partition ' + p; }
    }
    setFigure('fig-span', num(span), spanOf ? spanOf : 'read, not yet committed', level(span, 5000, 50000));
    const top = (st.top_devices || []).slice(0, 5);
    const max = Math.max(1, ...top.map((d) => d.rate));
    const bars = top.map((d) => h('div', { class: 'bar', 'data-device': d.device },
      h('span', { class: 'name', title: d.device, text: d.device }),
      h('svg', { viewBox: '0 0 100 10', preserveAspectRatio: 'none' },
        h('rect', { x: 0, y: 0, height: 10, width: Math.max(1, (d.rate / max) * 100).toFixed(1), class: d.isolated ? 'hot' : '' })),
      h('span', { class: 'num', text: rate(d.rate) + (d.isolated ? ' ⚑' : '') })));
    $('fig-top').querySelector('.bars').replaceChildren(...(bars.length ? bars : [h('span', { class: 'muted', text: hs.enabled ? 'no traffic' : 'not measured: hot isolation is off' })]));
  }
  function setFigure(id, value, sub, lvl) {
    const el = $(id);
    el.className = 'figure ' + (lvl || '');
    el.querySelector('.value').textContent = value;
    el.querySelector('.sub').textContent = sub;
  }

  function plot() {
    const top = Math.max(1, ...hist.in, ...hist.out) * 1.15;
    const n = hist.in.length, slots = Math.max(n, MIN_SLOTS);
    const line = path(hist.in, 600, 120, top, slots);
    $('line-in').setAttribute('d', line);
    const x0 = 600 - (600 / (slots - 1)) * (n - 1);
    $('area-in').setAttribute('d', line ? line + 'L600 120L' + x0.toFixed(1) + ' 120Z' : '');
    $('line-out').setAttribute('d', path(hist.out, 600, 120, top, slots));
    const step = n > 1 ? (hist.t[n - 1] - hist.t[0]) / (n - 1) / 1000 : 1;
    $('axis-from').textContent = ago(step * (slots - 1)) + ' ago';
    $('plot-max').textContent = rate(top) + '/s';
    const last = (s) => (s.length ? s[s.length - 1] : null);
    $('rate-in').textContent = rate(last(hist.in));
    $('rate-out').textContent = rate(last(hist.out));
    const svg = $('plot-rates');
    svg.dataset.points = String(hist.in.length);
    svg.dataset.in = String(last(hist.in) ?? '');
    svg.dataset.out = String(last(hist.out) ?? '');
  }

  function cpuTemp(d) {
    const ts = d.temperatures || [];
    return ts.find((t) => ['cpu-thermal', 'x86_pkg_temp', 'soc-thermal'].includes(t.type)) ||
      ts.reduce((a, t) => (!a || t.celsius > a.celsius ? t : a), null);
  }
  function health(st, dt) {
    const d = st.device || {};
    const p = prev && prev.device;
    let cpu = null;
    if (dt > 0 && p && p.cpu_total_seconds !== undefined && d.cpu_total_seconds > p.cpu_total_seconds) {
      cpu = Math.min(100, Math.max(0, (100 * (d.cpu_busy_seconds - p.cpu_busy_seconds)) / (d.cpu_total_seconds - p.cpu_total_seconds)));
    }
    push(hist.cpu, cpu);
    const t = cpuTemp(d);
    push(hist.temp, t ? t.celsius : null);
    const memUsed = d.memory_total_bytes ? 100 * (1 - d.memory_available_bytes / d.memory_total_bytes) : null;
    push(hist.mem, memUsed);
    const diskFree = d.disk_size_bytes ? (100 * d.disk_avail_bytes) / d.disk_size_bytes : null;
    push(hist.disk, d.disk_avail_bytes);
    push(hist.rss, d.process_rss_bytes);
    push(hist.load, d.load1);
    const cards = [
      ['cpu', 'CPU' + (d.cpus ? ' (' + d.cpus + ' cores)' : ''), cpu === null ? '–' : cpu.toFixed(0) + ' %', level(cpu, 70, 90), hist.cpu],
      ['temp', 'Temperature' + (t ? ' (' + t.type + ')' : ''), t ? t.celsius.toFixed(1) + ' °C' : 'n/a', t ? level(t.celsius, 70, 80) : '', hist.temp],
      ['mem', 'Memory used', memUsed === null ? '–' : memUsed.toFixed(0) + ' % of ' + bytes(d.memory_total_bytes), level(memUsed, 80, 90), hist.mem],
      ['disk', 'Disk free (data dir)', diskFree === null ? '–' : bytes(d.disk_avail_bytes) + ' · ' + diskFree.toFixed(0) + ' %',
        st.log && st.log.full ? 'bad' : diskFree === null ? '' : diskFree < 5 ? 'bad' : diskFree < 15 ? 'warn' : '', hist.disk],
      ['rss', 'edgeq RSS', bytes(d.process_rss_bytes), '', hist.rss],
      ['load', 'Load (1 min)', d.load1 === undefined ? '–' : d.load1.toFixed(2), d.cpus ? level(d.load1 / d.cpus, 1.5, 3) : '', hist.load],
    ];
    $('health').replaceChildren(...cards.map(([key, label, value, lvl, series]) =>
      h('div', { class: 'metric ' + lvl, 'data-metric': key },
        h('div', { class: 'label', text: label }), h('div', { class: 'value', text: value }), sparkline(series))));
    const failed = d.failed_collectors || [];
    $('health-failed').hidden = !failed.length;
    $('health-failed').textContent = failed.length ? 'collectors failing: ' + failed.join(', ') + ' (see the node log)' : '';
  }

  function groupTable(st, groups, delta) {
    const pg = {};
    for (const g of (prev && prev.groups) || []) pg[g.filter + ' ' + g.queue] = g;
    const leaders = (st.cluster && st.cluster.leaders) || {};
    const rows = [];
    for (const g of groups) {
      const key = g.filter + ' ' + g.queue;
      const l = leaders[key];
      const leader = g.leading ? (st.cluster ? 'this node' : '–') : l && l.leader ? l.leader : 'electing';
      const byNode = Object.entries(g.members_by_node || {}).map(([n, c]) => n + ':' + c).join(' ');
      const members = g.members + (byNode && st.cluster ? ' (' + byNode + ')' : '');
      const p = pg[key];
      const lead = g.leading;
      rows.push(h('tr', { 'data-group': key },
        h('td', { class: 'txt' }, h('b', { text: g.queue }), ' ', h('span', { class: 'muted', text: g.filter }), g.declared ? ' ' : null, g.declared ? chip('declared', 'plain') : null),
        td(leader, 'cluster-only'),
        td(members, g.members === 0 ? 'warn' : ''),
        td(lead ? num(g.in_flight) : '–'), td(lead ? num(g.pending) : '–'),
        h('td', { class: 'lag ' + (lead ? level(g.lag, 10000, 100000) : ''), 'data-value': lead ? g.lag : '', text: lead ? num(g.lag) : '–' }),
        td(lead && p && p.leading ? rate(delta(p.delivered, g.delivered)) : '–'),
        td(lead ? ms(g.latency_p50_ms) : '–'), td(lead ? ms(g.latency_p99_ms) : '–', lead ? level(g.latency_p99_ms, 1000, 5000) : ''),
        td(lead ? num(g.redeliveries) : '–', g.redeliveries > 0 ? 'warn' : ''),
        td(lead ? num(g.dead_letters) : '–', g.dead_letters > 0 ? 'bad' : '')));
      if (lead) {
        const parts = Object.keys(Object.assign({}, g.window_span, g.partition_lag)).sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
        const chips = parts.map((pn) => chip('p' + pn + ' lag ' + num((g.partition_lag || {})[pn] || 0) + ' · span ' + num((g.window_span || {})[pn] || 0),
          level((g.partition_lag || {})[pn] || 0, 10000, 100000) || 'plain'));
        const ml = (g.member_list || []).map((m) => m.id + ' ' + m.in_flight + '/' + m.credit).join(', ');
        rows.push(h('tr', { class: 'sub' }, h('td', { colspan: 11 }, ...chips.flatMap((c) => [c, ' ']), ml ? h('span', { text: ' members (in flight/credit): ' + ml }) : null)));
      }
    }
    fill($('groups').tBodies[0], rows, 'no queue groups yet: a worker subscribes with a queue name (SUB telemetry.> <queue>)', 11);
  }

  // bridgesOf finds every list of bridges in the status, whatever its kind:
  // arrays of objects with a name and a state (connected, open, up or state).
  function bridgesOf(st) {
    const out = [];
    for (const [kind, list] of Object.entries(st)) {
      if (!Array.isArray(list)) continue;
      for (const b of list) {
        if (!b || typeof b !== 'object' || typeof b.name !== 'string') continue;
        let state;
        if (typeof b.state === 'string') state = b.state;
        else if (typeof b.connected === 'boolean') state = b.connected ? (b.subscribed === false ? 'subscribing' : 'up') : 'down';
        else if (typeof b.open === 'boolean') state = b.open ? 'up' : 'down';
        else if (typeof b.up === 'boolean') state = b.up ? 'up' : 'down';
        else continue;
        const stored = typeof b.stored === 'number' ? b.stored : b.counters && typeof b.counters.stored === 'number' ? b.counters.stored : undefined;
        out.push({ kind, name: b.name, state, stored, where: b.broker || b.path || b.address || b.url || '', err: b.last_error || '', errTime: b.last_error_time });
      }
    }
    return out;
  }
  function bridgeTable(st, delta) {
    const before = {};
    if (prev) for (const b of bridgesOf(prev)) before[b.kind + '/' + b.name] = b;
    const now = Date.parse(st.time);
    const rows = bridgesOf(st).map((b) => {
      const p = before[b.kind + '/' + b.name];
      const good = /^(up|connected|open|running|ok)$/i.test(b.state);
      const bad = /^(down|error|failed|closed|disconnected|stopped)$/i.test(b.state);
      const errAge = b.errTime ? ' (' + ago((now - Date.parse(b.errTime)) / 1000) + ' ago)' : '';
      return h('tr', { 'data-bridge': b.kind + '/' + b.name, 'data-state': b.state },
        h('td', { class: 'txt' }, h('b', { text: b.name }), ' ', h('span', { class: 'muted', text: b.where })),
        td(b.kind),
        h('td', { class: 'state' }, chip(b.state, good ? '' : bad ? 'bad' : 'warn')),
        td(num(b.stored)), td(p ? rate(delta(p.stored, b.stored)) : '–'),
        td(b.err ? b.err + errAge : '–', 'wrap' + (b.err && !good ? ' bad' : '')));
    });
    fill($('bridges').tBodies[0], rows, 'no bridges configured (mqtt:, serial: in the config)', 6);
  }

  function deviceTable(st) {
    const rows = (st.top_devices || []).map((d) => h('tr', {},
      h('td', { class: 'txt' }, h('a', { href: '#device=' + encodeURIComponent(d.device), text: d.device })),
      td(rate(d.rate)), h('td', {}, d.isolated ? chip('isolated', 'warn') : '–')));
    fill($('devices').tBodies[0], rows, 'no traffic', 3);
    const hs = st.hot || {};
    $('hot-summary').textContent = hs.enabled
      ? 'isolation on · ' + num(hs.tracked) + ' tracked · ' + num(hs.isolated) + ' isolated · ' + num(hs.moves) + ' moves' + (hs.move_errors ? ' · ' + num(hs.move_errors) + ' move errors' : '')
      : 'hot isolation off';
  }

  function partitionTable(st, delta) {
    const pp = {};
    for (const p of (prev && prev.partitions) || []) pp[p.partition] = p;
    const rows = (st.partitions || []).map((p) => {
      const o = pp[p.partition];
      return h('tr', { 'data-partition': p.partition },
        h('td', {}, String(p.partition), p.hot ? ' ' : null, p.hot ? chip('hot', 'plain') : null),
        td(num(p.first)), td(num(p.last)), td(num(p.durable)), td(bytes(p.bytes)),
        td(o ? rate(delta(o.appends, p.appends)) : '–'),
        td(ms(p.fsync_p99_ms), level(p.fsync_p99_ms, 100, 1000)),
        td(num(p.corrupt_skipped), p.corrupt_skipped ? 'warn' : ''));
    });
    fill($('partitions').tBodies[0], rows, 'no partitions', 8);
    const log = st.log || {};
    $('log-summary').textContent = bytes(log.bytes) + ' of ' + bytes(log.max_bytes) + (log.full ? ' · FULL, rejecting' : '');
    $('log-summary').className = log.full ? 'error' : 'muted';
  }

  function cluster(st) {
    const c = st.cluster;
    $('cluster-panel').hidden = !c;
    if (!c) return;
    const now = Date.parse(st.time);
    const peers = (c.peers || []).map((p) => h('tr', { 'data-peer': p.node },
      h('td', { class: 'txt', text: p.node }), td(p.addr + (p.dialed ? '' : ' (in)')), td(p.priority),
      h('td', {}, chip('up ' + ago((now - Date.parse(p.since)) / 1000))), td(ago((now - Date.parse(p.last_seen)) / 1000) + ' ago'),
      td(bytes(p.queued_bytes))));
    for (const a of c.unreachable || []) {
      peers.push(h('tr', { 'data-peer': a.node || a.addr }, h('td', { class: 'txt', text: a.node || '?' }), td(a.addr), td('–'),
        h('td', {}, chip(a.node ? 'down' : 'no answer', 'bad')), td('–'), td('–')));
    }
    fill($('peers').tBodies[0], peers, 'no peers', 6);
    const leaders = (st.groups || []).map((g) => {
      const l = (c.leaders || {})[g.filter + ' ' + g.queue];
      return h('tr', { 'data-leader': g.filter + ' ' + g.queue, 'data-node': l && l.leader ? l.leader : '' }, h('td', { class: 'txt', text: g.queue + ' ' + g.filter }),
        h('td', {}, l && l.leader ? l.leader + (l.self ? ' (this node)' : '') : chip('electing', 'warn')),
        td(l ? l.epoch : '–'), td(Object.entries(g.members_by_node || {}).map(([n, k]) => n + ':' + k).join(' ') || '–'));
    });
    fill($('leaders').tBodies[0], leaders, 'no groups', 4);
    const e = c.election || {}, pe = c.peer_events || {};
    $('cluster-summary').textContent = c.name + ' · peer listener ' + c.listen;
    $('elections').textContent = 'elections ' + num(e.elections) + ' · leaderships won ' + num(e.leaderships) + ' (handed over ' + num(e.hand_overs) +
      ', deposed ' + num(e.deposed) + ') · take-overs ' + num(e.take_overs) + ' · peers up ' + num(pe.ups) + ' / down ' + num(pe.downs) + ' · refused peers ' + num(c.refused_peers);
  }

  function connections(st, delta) {
    const c = st.connections || {};
    $('conns').textContent = 'NATS connections ' + num(c.current) + ' (total ' + num(c.total) + ', auth failures ' + num(c.auth_failures) +
      ', slow-consumer closes ' + num((c.slow_consumer_closes || 0) + (c.write_timeout_closes || 0)) + ') · live tail ' +
      num((st.live_tail || {}).subscribers) + ' subscribers, ' + num((st.live_tail || {}).dropped) + ' dropped';
    const ps = (prev && prev.sources) || {};
    const rows = Object.keys(st.sources || {}).sort().map((name) => {
      const s = st.sources[name], p = ps[name];
      return h('tr', {}, h('td', { class: 'txt', text: name }), td(num(s.msgs)), td(p ? rate(delta(p.msgs, s.msgs)) : '–'), td(bytes(s.bytes)), td(num(s.errors), s.errors ? 'warn' : ''));
    });
    fill($('sources').tBodies[0], rows, 'nothing ingested yet', 5);
  }

  // ---- the device view ----
  const DEVICE_ID = /^[A-Za-z0-9_:@-]{1,128}$/;
  async function lookup(id) {
    const view = $('device-view');
    if (!DEVICE_ID.test(id)) {
      view.replaceChildren(h('p', { class: 'error', text: 'A device ID is 1–128 characters of A–Z a–z 0–9 _ : @ -' }));
      return;
    }
    view.replaceChildren(h('p', { class: 'muted', text: 'looking up ' + id + '…' }));
    let res, d;
    try {
      res = await fetch('/v1/devices/' + encodeURIComponent(id) + '?n=10', { headers: authHeaders(), cache: 'no-store' });
      d = await res.json();
    } catch (e) {
      view.replaceChildren(h('p', { class: 'error', text: 'lookup failed: ' + e.message }));
      return;
    }
    if (res.status === 401) return askToken(refusal());
    if (!res.ok) {
      view.replaceChildren(h('p', { class: 'error', text: d.error || res.statusText }));
      return;
    }
    view.dataset.device = d.device;
    if (!d.known) {
      view.replaceChildren(h('p', { class: 'muted', text: d.device + ': no records on this node (it would go to partition ' + d.partition + ').' }));
      return;
    }
    const kv = h('dl', { class: 'kv' },
      h('dt', { text: 'device' }), h('dd', { text: d.device }),
      h('dt', { text: 'partition' }), h('dd', { 'data-field': 'partition', text: d.partition + (d.partition !== d.home_partition ? ' (isolated; home ' + d.home_partition + ')' : '') }),
      h('dt', { text: 'last seq' }), h('dd', { 'data-field': 'last_seq', text: num(d.last_seq) }),
      h('dt', { text: 'rate' }), h('dd', { text: d.rate === undefined ? 'idle' : rate(d.rate) + ' msgs/s' }));
    for (const g of d.groups) {
      const lag = Object.entries(g.partition_lag).map(([p, v]) => 'p' + p + ' ' + num(v)).join(', ');
      kv.append(h('dt', { text: g.queue }), h('dd', {},
        !g.behind ? chip('caught up') : chip((g.behind >= d.records.length ? '≥ ' : '') + g.behind + ' not committed', 'warn'),
        (g.done_seq ? ' committed to seq ' + num(g.done_seq) : '') + (lag ? ' · partition lag ' + lag : '')));
    }
    const recs = d.records.map((r) => h('tr', {},
      td(num(r.seq)), td(new Date(r.time).toLocaleTimeString()), td(r.partition + '/' + r.offset), td(r.source),
      h('td', { class: 'wrap' }, h('pre', { class: 'payload', text: r.kind === 'move' ? '→ moved to partition ' + r.move_target
        : r.payload !== undefined ? r.payload + (r.truncated ? '…' : '') : r.payload_base64 ? '(binary, ' + r.size + ' bytes)' : '' }))));
    const table = h('table', {}, h('thead', {}, h('tr', {}, ...['seq', 'time', 'p/offset', 'source', 'payload'].map((x) => h('th', { text: x })))), h('tbody'));
    fill(table.tBodies[0], recs, d.complete ? 'no records' : 'none found within the scan budget', 5);
    view.replaceChildren(kv, h('div', { class: 'scroll' }, table),
      h('p', { class: 'muted', text: 'read ' + num(d.scanned_records) + ' records (' + bytes(d.scanned_bytes) + ') from the log' + (d.complete ? '' : ', budget reached') }));
  }
  $('lookup').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const id = $('device-id').value.trim();
    history.replaceState(null, '', '#device=' + encodeURIComponent(id));
    lookup(id);
  });
  function fromHash() {
    const m = /^#device=(.+)$/.exec(location.hash);
    if (m) {
      const id = decodeURIComponent(m[1]);
      $('device-id').value = id;
      lookup(id);
    }
  }
  window.addEventListener('hashchange', fromHash);
  fromHash();
  connect();
})();
