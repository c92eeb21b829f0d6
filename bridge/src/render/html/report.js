// mpiq's report page: everything drawn here comes from the JSON embedded in
// this file (#mpiq-data), which is the report `mpiq --format json` prints.
// No analysis is made here; the words are the report's own. Nothing is
// fetched: the page works from file:// and as a CI artifact.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("mpiq-data").textContent);
  const A = DATA.analysis || null;
  // The page's compact form (bridge/src/render/html.rs): names, frames and
  // stacks once, ranks by index into them.
  const TX = DATA.texts || [], FR = DATA.frames || [], STK = DATA.stacks || [];
  const tx = function (i) { return i == null ? null : TX[i]; };
  const frameCache = new Map();
  function frameOf(i) {
    let f = frameCache.get(i);
    if (!f) {
      const a = FR[i] || [];
      f = { function: tx(a[0]), object: tx(a[1]), file: tx(a[2]), line: a[3], offset: a[4], inlined: !!a[5], python: !!a[6] };
      frameCache.set(i, f);
    }
    return f;
  }
  const PROCS = (DATA.processes || []).map(function (p) {
    return { world_rank: p.rank, pid: p.pid, node: tx(p.node), executable: tx(p.exe), error: tx(p.error),
      queues_missing: p.queues_missing || null, stacks_missing: tx(p.stacks_missing), os: p.os || null,
      threads: p.threads || [], comms: (p.comms || []).map(tx), ops: p.ops || [],
      unavailable: (p.unavailable || []).map(tx), recorder: p.recorder || null };
  });
  const byRank = new Map();
  PROCS.forEach(function (p, i) { byRank.set(p.world_rank == null ? "i" + i : p.world_rank, p); });
  const $ = function (id) { return document.getElementById(id); };
  const SVGNS = "http://www.w3.org/2000/svg";

  function el(tag, attrs, kids) {
    const e = document.createElement(tag);
    if (attrs) for (const k in attrs) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "cls") e.className = attrs[k];
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c != null) e.append(c); });
    return e;
  }
  function sv(tag, attrs, kids) {
    const e = document.createElementNS(SVGNS, tag);
    if (attrs) for (const k in attrs) {
      if (k === "text") e.textContent = attrs[k];
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    (kids || []).forEach(function (c) { if (c != null) e.append(c); });
    return e;
  }
  // [[a,b],...] or [r,...] as "0-3,7".
  function rangesText(rs) {
    return rs.map(function (r) { return r[0] === r[1] ? String(r[0]) : r[0] + "-" + r[1]; }).join(",");
  }
  function toRanges(list) {
    const s = Array.from(new Set(list)).sort(function (a, b) { return a - b; });
    const out = [];
    s.forEach(function (r) {
      const last = out[out.length - 1];
      if (last && r === last[1] + 1) last[1] = r; else out.push([r, r]);
    });
    return out;
  }
  function countRanges(rs) { return rs.reduce(function (n, r) { return n + r[1] - r[0] + 1; }, 0); }
  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }

  // ---- each rank's class: waiting in MPI, computing, blocked outside MPI,
  // stopped, gone (from the analysis's `where` and the OS state).
  const where = new Map();
  ((A && A.where) || []).forEach(function (w) { where.set(w.rank, w); });
  function rankClass(r) {
    const p = byRank.get(r);
    const os = p && p.os;
    if (p && p.error && !p.threads.length && !p.comms.length) return "gone";
    if (os && (os.state === "Z" || os.state === "X")) return "gone";
    if (os && os.state === "T") return "stopped";
    const w = where.get(r);
    if (w) {
      if (w.state === "in_mpi" || w.state === "computing" || w.state === "idle") return w.state;
    }
    if (!p) return "gone";
    return "nostack";
  }
  const CLASS_WORDS = { in_mpi: "waiting in MPI", computing: "computing", idle: "blocked outside MPI",
    stopped: "stopped (SIGSTOP or a tracer)", gone: "gone or unreadable", nostack: "no stacks", mixed: "ranks differ" };
  const classCache = new Map();
  function cls(r) { let c = classCache.get(r); if (c === undefined) { c = rankClass(r); classCache.set(r, c); } return c; }
  function rangesClass(rs) {
    let seen = null;
    for (const [a, b] of rs) for (let r = a; r <= b; r++) {
      const c = cls(r);
      if (seen === null) seen = c; else if (seen !== c) return "mixed";
    }
    return seen || "nostack";
  }

  function rankLink(r) {
    return el("a", { cls: "rank", href: "#rank-" + r, text: String(r), "data-rank": r,
      onclick: function (ev) { ev.preventDefault(); showRank(r); } });
  }
  function rankLinks(rs, max) {
    const span = el("span");
    let n = 0;
    outer: for (const [a, b] of rs) {
      if (b - a >= 2 && (b - a + 1) + n > max) {
        span.append(rankLink(a), "-", rankLink(b), " ");
        n += 2;
      } else for (let r = a; r <= b; r++) {
        if (n >= max) { span.append("…"); break outer; }
        span.append(rankLink(r), " ");
        n++;
      }
    }
    return span;
  }

  // ---- the verdict line.
  function drawVerdict() {
    const v = A ? A.verdict : null;
    const badge = $("badge");
    // Never an all-clear while ranks wait: a job with no deadlock whose
    // ranks wait for another says so in the badge too.
    const waits = A && ((A.waited_on || []).length || (A.edges || []).length);
    badge.className = "badge " + (v === "no_deadlock" && waits ? "waiting" : v || "none");
    badge.textContent = v === "deadlock" ? "DEADLOCK" : v === "unknown" ? "UNKNOWN" : v === "no_deadlock" ? (waits ? "NO DEADLOCK, BUT RANKS WAIT" : "NO DEADLOCK") : "NO ANALYSIS";
    $("summary").textContent = A ? A.summary : "No cross-rank analysis was made (one process, or --no-analysis).";
    if (DATA.exit) $("exit").textContent = "mpiq's exit status: " + DATA.exit.status + " (" + DATA.exit.meaning + ").";
    const list = $("waited");
    ((A && A.waited_on) || []).forEach(function (w) {
      const li = el("li", null, ["Waited on: rank" + (w.ranks.length === 1 ? " " : "s "),
        rankLinks(toRanges(w.ranks), 12), " ", w.text]);
      list.append(li);
    });
    const nodes = new Set(PROCS.map(function (p) { return p.node; }).filter(function (n) { return n; }));
    const meta = [plural(PROCS.length, "process", "processes")];
    if (nodes.size) meta.push(plural(nodes.size, "node", "nodes"));
    $("meta").textContent = meta.join(" on ");
  }

  // ---- the wait-for graph, drawn here from the analysis's edges (or, when
  // only stacks were read, from whom the waiting ranks wait for).
  const MAX_NODES = 48;
  function drawGraph() {
    const box = $("graph");
    const cycles = (A && A.cycles) || [];
    let edges = ((A && A.edges) || []).map(function (e) {
      return { from: e.from, to: e.to, words: e.words || (e.op + " on " + e.communicator + (e.tag != null ? " tag " + e.tag : "")), inferred: false };
    });
    const waitedRanks = new Set();
    ((A && A.waited_on) || []).forEach(function (w) { w.ranks.forEach(function (r) { waitedRanks.add(r); }); });
    if (!edges.length) {
      ((A && A.waited_on) || []).forEach(function (w) {
        (w.waiters || []).forEach(function (wt) {
          wt.ranks.forEach(function (f) { w.ranks.forEach(function (t) { if (f !== t) edges.push({ from: f, to: t, words: "waits for (from the stacks)", inferred: true }); }); });
        });
      });
    }
    const cycleEdge = new Set();
    const onCycle = new Set();
    cycles.forEach(function (c) {
      c.forEach(function (r, i) { onCycle.add(r); cycleEdge.add(r + ">" + c[(i + 1) % c.length]); });
    });
    if (!edges.length) {
      let why = "No analysis: no graph.";
      if (A && A.stalled) why = "No wait-for edges could be resolved (the queues or the communicators were not readable), yet every rank is blocked in MPI and nothing changed between the samples: ranks " + rangesText(toRanges(A.blocked.concat(...A.cycles))) + ".";
      else if (A) why = "No rank waits for another in this snapshot: nothing to draw.";
      box.append(el("p", { cls: "note", text: why }));
      return;
    }
    const order = [];
    const seen = new Set();
    function add(r) { if (!seen.has(r)) { seen.add(r); order.push(r); } }
    cycles.forEach(function (c) { c.forEach(add); });
    waitedRanks.forEach(add);
    edges.forEach(function (e) { add(e.from); add(e.to); });
    const all = order.length;
    const shown = new Set(order.slice(0, MAX_NODES));
    const nodes = order.slice(0, MAX_NODES);
    const n = nodes.length;
    const W = 640, H = n <= 2 ? 260 : 480, cx = W / 2, cy = H / 2;
    const rad = Math.min(W, H) / 2 - 40;
    const nr = n > 24 ? 11 : 16;
    const pos = new Map();
    nodes.forEach(function (r, i) {
      const a = -Math.PI / 2 + 2 * Math.PI * i / Math.max(n, 1);
      pos.set(r, n === 1 ? [cx, cy] : [cx + rad * Math.cos(a), cy + rad * Math.sin(a)]);
    });
    const svg = sv("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "wait-for graph" });
    svg.append(sv("defs", null, [
      sv("marker", { id: "arr", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
        [sv("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8c959f" })]),
      sv("marker", { id: "arrc", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "6", markerHeight: "6", orient: "auto-start-reverse" },
        [sv("path", { d: "M0,0 L10,5 L0,10 z", fill: "#c62828" })]),
    ]));
    let drawnEdges = 0, cycleDrawn = 0;
    const done = new Set();
    edges.forEach(function (e) {
      if (!shown.has(e.from) || !shown.has(e.to) || e.from === e.to) return;
      const key = e.from + ">" + e.to;
      if (done.has(key)) return;
      done.add(key);
      const [x1, y1] = pos.get(e.from), [x2, y2] = pos.get(e.to);
      const dx = x2 - x1, dy = y2 - y1, d = Math.hypot(dx, dy) || 1;
      const isCycle = cycleEdge.has(key);
      const line = sv("line", { x1: x1 + dx / d * nr, y1: y1 + dy / d * nr, x2: x2 - dx / d * (nr + 6), y2: y2 - dy / d * (nr + 6),
        "class": (isCycle ? "cycle" : "") + (e.inferred ? " inferred" : ""), "marker-end": isCycle ? "url(#arrc)" : "url(#arr)",
        "data-from": e.from, "data-to": e.to }, [sv("title", { text: "rank " + e.from + " → rank " + e.to + ": " + e.words })]);
      svg.append(line);
      drawnEdges++;
      if (isCycle) cycleDrawn++;
    });
    nodes.forEach(function (r) {
      const [x, y] = pos.get(r);
      const c = cls(r);
      const g = sv("g", { "class": "node" + (onCycle.has(r) ? " oncycle" : waitedRanks.has(r) ? " waited" : ""), "data-rank": r,
        onclick: function () { showRank(r); } }, [
        onCycle.has(r) || waitedRanks.has(r) ? sv("circle", { "class": "ring", cx: x, cy: y, r: nr + 4 }) : null,
        sv("circle", { cx: x, cy: y, r: nr, fill: getComputedStyle(document.documentElement).getPropertyValue("--" + (c === "mixed" ? "in_mpi" : c)) || "#888" }),
        sv("text", { x: x, y: y + 4, "text-anchor": "middle", text: String(r) }),
        sv("title", { text: "rank " + r + ": " + CLASS_WORDS[c] + ((where.get(r) || {}).text ? " — " + where.get(r).text : "") }),
      ]);
      svg.append(g);
    });
    box.append(svg);
    const words = [plural(all, "rank", "ranks") + ", " + plural(drawnEdges, "wait", "waits") + " drawn"];
    if (cycles.length) words.push(plural(cycles.length, "cycle", "cycles") + " in red (" + plural(cycleDrawn, "edge", "edges") + ")");
    if (waitedRanks.size) words.push("ranks waited on ringed in amber");
    if (all > n) words.push((all - n) + " more ranks not drawn (in the facts below)");
    if (edges.length && edges[0].inferred) words.push("dashed: from the stacks, not from queues");
    const cut = A && A.page_cut && A.page_cut.edges;
    if (cut) words.push("the page keeps " + cut.kept + " of the " + cut.of + " waits (every one of a cycle; --format json has them all)");
    box.append(el("p", { cls: "note", id: "graph-note", text: words.join("; ") + ". Click a rank to open it." }));
  }

  // ---- the merged stacks as a tree, folded past where the ranks part;
  // children are made when a node is first opened (16,000 ranks stay quick).
  const treeNodes = [];
  function drawTree() {
    const t = DATA.stack_tree;
    const box = $("tree");
    if (!t || !t.ranks || !t.ranks.length) {
      box.append(el("p", { cls: "note", text: "No call stacks were read." }));
      return;
    }
    const ul = el("ul", { cls: "tree" });
    box.append(ul);
    // Open down to where the ranks part, and that node's children shown.
    let n = t, path = [];
    while (n) { path.push(n); if ((n.children || []).length !== 1) break; n = n.children[0]; }
    ul.append(makeNode(t, 0, new Set(path)));
    const hid = t.hidden_service_threads;
    if (hid) box.append(el("p", { cls: "note", text: plural(hid, "service thread", "service threads") + " of the MPI or its runtime not shown." }));
    (t.without_stacks || []).forEach(function (w) {
      box.append(el("p", { cls: "note" }, ["Rank ", rankLink(w.rank), " has no stacks: " + w.why]));
    });
  }
  function makeNode(n, depth, openSet) {
    const kids = n.children || [];
    const c = rangesClass(n.ranks);
    const li = el("li", { cls: "tnode" });
    li._data = n;
    treeNodes.push(li);
    const tw = el("span", { cls: "tw", text: kids.length ? "▸" : "·" });
    const row = el("div", { cls: "row", title: CLASS_WORDS[c] }, [
      tw, el("span", { cls: "sw c-" + c }),
      el("span", { cls: "lbl", text: n.label }),
      n.location ? el("span", { cls: "loc", text: n.location }) : null,
      el("span", { cls: "rk", text: "[" + rangesText(n.ranks) + "] " + plural(countRanges(n.ranks), "rank", "ranks") + (n.threads > countRanges(n.ranks) ? ", " + n.threads + " threads" : "") }),
    ]);
    li.append(row);
    row.addEventListener("click", function () { toggle(li); });
    if (openSet && openSet.has(n)) open(li, openSet);
    return li;
  }
  function open(li, openSet) {
    const n = li._data;
    if (!li._body) {
      const body = el("div");
      body.append(el("div", { cls: "tranks" }, ["ranks: ", rankLinks(n.ranks, 64)]));
      if (n.detail) body.append(el("div", { cls: "tdetail", text: n.detail }));
      const ul = el("ul");
      (n.children || []).forEach(function (k) { ul.append(makeNode(k, 0, openSet)); });
      body.append(ul);
      li._body = body;
      li.append(body);
    }
    li._body.hidden = false;
    li.classList.add("open");
    li.querySelector(".tw").textContent = (n.children || []).length ? "▾" : "·";
  }
  function toggle(li) {
    if (li._body && !li._body.hidden) {
      li._body.hidden = true;
      li.classList.remove("open");
      li.querySelector(".tw").textContent = (li._data.children || []).length ? "▸" : "·";
    } else open(li, null);
  }

  // ---- one rank's detail.
  const MPI_OBJ = /lib(mpi|open-pal|open-rte|pmix|prrte|ucp|uct|ucs|ucm|fabric|psm|hwloc|event|mpich|tvmpich|ompi|hcoll|mca_|verbs|rdmacm|ibverbs)|\/openmpi\/|mca_/;
  const SYS_OBJ = /\/(libc|libpthread|ld-linux|libdl|librt|libm|libgcc_s|libstdc\+\+|libgfortran|linux-vdso)[.-]/;
  const MPI_FN = /^(P?MPI_|ompi_|opal_|mca_|orte_|prte_|pmix_|PMIx_|MPID|MPIR_|MPIC_|MPII_|MPL_|ucp_|uct_|ucs_|fi_|psm)/;
  function frameKind(f) {
    const o = f.object || "", fn = f.function || "";
    if (MPI_FN.test(fn) || MPI_OBJ.test(o)) return "mpi";
    if (SYS_OBJ.test(o) || /^(__|_dl_|clone|start_thread)/.test(fn)) return "sys";
    return "app";
  }
  function base(p) { return p ? String(p).split("/").pop() : ""; }
  function frameText(f) {
    let s = f.function || (f.offset != null ? base(f.object) + "+0x" + f.offset.toString(16) : "?? (" + base(f.object) + ")");
    if (f.file) s += " (" + base(f.file) + (f.line ? ":" + f.line : "") + ")";
    else if (f.object && f.function) s += " from " + base(f.object);
    return s;
  }
  function framesList(frames) {
    const ul = el("ul", { cls: "frames" });
    let i = 0;
    while (i < frames.length) {
      const k = frameKind(frames[i]);
      if (k === "app") { ul.append(el("li", { cls: "app", text: "#" + i + " " + frameText(frames[i]) })); i++; continue; }
      let j = i;
      while (j < frames.length && frameKind(frames[j]) !== "app") j++;
      const objs = Array.from(new Set(frames.slice(i, j).map(function (f) { return base(f.object) || "?"; })));
      const d = el("details", null, [el("summary", { text: plural(j - i, "frame", "frames") + " in the MPI and the system (" + objs.slice(0, 4).join(", ") + (objs.length > 4 ? ", …" : "") + ")" })]);
      for (let x = i; x < j; x++) d.append(el("li", { text: "#" + x + " " + frameText(frames[x]) }));
      ul.append(el("li", null, [d]));
      i = j;
    }
    return ul;
  }
  function showRank(r, quiet) {
    const box = $("rank");
    box.textContent = "";
    const p = byRank.get(r);
    if (!p) { box.append(el("p", { text: "No rank " + r + " in this report." })); return; }
    const c = cls(r);
    box.append(el("h3", null, [el("span", { cls: "sw c-" + c }), "Rank " + r + " — " + CLASS_WORDS[c]]));
    const w = where.get(r);
    if (w) box.append(el("p", { text: "Rank " + r + " " + w.text }));
    const facts = [["pid", p.pid], ["node", p.node], ["executable", p.executable]];
    if (p.os) {
      facts.push(["OS state", p.os.state + (p.os.syscall ? ", in system call " + p.os.syscall : "") + (p.os.wchan ? ", waiting in " + p.os.wchan : "")]);
      facts.push(["CPU time", p.os.cpu_ms + " ms"]);
    }
    if (p.error) facts.push([p.queues_missing ? "queues not read" : "not read", p.error]);
    else if (p.queues_missing) facts.push(["queues not read", String(p.queues_missing).replace(/_/g, " ")]);
    const tb = el("table");
    facts.forEach(function (f) { if (f[1] != null && f[1] !== "") tb.append(el("tr", null, [el("th", { text: f[0] }), el("td", { cls: "mono", text: String(f[1]) })])); });
    box.append(tb);
    if (p.threads.length) {
      box.append(el("h4", { text: "Stacks (innermost first; the MPI's and the system's frames folded)" }));
      p.threads.forEach(function (th) {
        const tid = th[0], name = tx(th[2]), note = tx(th[3]);
        const head = "thread " + tid + (name ? " (" + name + ")" : "") + (note ? ": " + note : "");
        const frames = (STK[th[1]] || []).map(frameOf);
        if (frames.length && !frames.some(function (f) { return frameKind(f) === "app"; })) {
          // A thread of the MPI's or the system's only (a progress thread): folded whole.
          const d = el("details", { cls: "service" }, [el("summary", { cls: "note", text: head + ": a thread of the MPI or the system, " + plural(frames.length, "frame", "frames") })]);
          d.append(framesList(frames));
          box.append(d);
          return;
        }
        box.append(el("div", { cls: "note", text: head }));
        box.append(framesList(frames));
      });
    } else if (p.stacks_missing) box.append(el("p", { cls: "note", text: "No stacks: " + p.stacks_missing }));
    const qt = el("table", null, [el("tr", null, ["communicator", "queue", "peer", "tag", "bytes", "status"].map(function (h) { return el("th", { text: h }); }))]);
    p.ops.forEach(function (o) {
      // [communicator, queue, peer local, peer world, any source, tag, any tag, length, status]
      const peer = o[4] ? "ANY_SOURCE" : o[2] == null ? "?" : o[3] != null && o[3] !== o[2] ? o[2] + " (world " + o[3] + ")" : String(o[2]);
      qt.append(el("tr", null, [tx(o[0]), o[1], peer, o[6] ? "ANY_TAG" : o[5], o[7], o[8]].map(function (v) { return el("td", { text: v == null ? "" : String(v) }); })));
    });
    box.append(el("h4", { text: "Message queues" }));
    if (p.ops.length) box.append(qt);
    else box.append(el("p", { cls: "note", text: p.comms.length ? "No pending operation in " + plural(p.comms.length, "communicator", "communicators") + "." : "Queues not read." }));
    p.unavailable.slice(0, 4).forEach(function (u) { box.append(el("p", { cls: "note", text: u })); });
    const rec = p.recorder;
    if (rec) {
      box.append(el("h4", { text: "Last MPI calls (flight recorder: the last " + rec.calls.length + " of " + rec.calls_started + ")" }));
      const ct = el("table", null, [el("tr", null, ["#", "call", "communicator", "peer", "tag", "took"].map(function (h) { return el("th", { text: h }); }))]);
      rec.calls.forEach(function (k) {
        ct.append(el("tr", null, [k.seq, cName(k.call) + (k.collective_seq != null ? " #" + k.collective_seq : ""), commName(rec, k.comm), k.peer, k.tag, k.end_ns ? ((k.end_ns - k.start_ns) / 1e6).toFixed(3) + " ms" : "still in it"].map(function (v) { return el("td", { text: v == null ? "" : String(v) }); })));
      });
      box.append(ct);
      if (rec.pending.length) box.append(el("p", { text: "Pending requests: " + rec.pending.map(function (q) { return cName(q.call) + (q.peer != null ? " peer " + q.peer : "") + (q.tag != null ? " tag " + q.tag : "") + (q.waited_by ? " (waited on)" : ""); }).join("; ") }));
    }
    if (!quiet) box.scrollIntoView({ block: "nearest" });
    document.querySelectorAll("#timeline .rl").forEach(function (t) { t.style.fontWeight = t.dataset.rank === String(r) ? "700" : ""; });
    history.replaceState(null, "", "#rank-" + r);
  }
  // The recorder's call names (`irecv`) as C's (`MPI_Irecv`).
  function cName(call) { return /^MPI_/.test(call) ? call : "MPI_" + call.charAt(0).toUpperCase() + call.slice(1); }
  function isCollective(k) { return k.collective_seq != null || COLL.test(cName(k.call)); }
  function commName(rec, h) {
    if (!h) return "";
    const c = (rec.comms || []).find(function (x) { return x.handle === h; });
    return c ? (c.world ? "MPI_COMM_WORLD" : h + " (" + c.size + " ranks)") : h;
  }

  // ---- the flight recorder's last calls, every rank on one time line per
  // node (each node has its own clock).
  const COLL = /^MPI_(I?)(Barrier|Bcast|Reduce|Allreduce|Gather|Gatherv|Allgather|Allgatherv|Scatter|Scatterv|Alltoall|Alltoallv|Alltoallw|Scan|Exscan|Reduce_scatter|Reduce_scatter_block|Comm_split|Comm_dup|Comm_create|Finalize)$/;
  const MAX_ROWS = 64;
  function drawTimeline() {
    const box = $("timeline");
    const rows = PROCS.filter(function (p) { return p.recorder && p.recorder.calls && p.recorder.calls.length; });
    if (!rows.length) { box.closest("section").hidden = true; return; }
    const named = new Set(((A && A.waited_on) || []).flatMap(function (w) { return w.ranks; }));
    rows.sort(function (a, b) { return (named.has(b.world_rank) - named.has(a.world_rank)) || (a.world_rank - b.world_rank); });
    const shownRows = rows.slice(0, MAX_ROWS).sort(function (a, b) { return a.world_rank - b.world_rank; });
    // Per node: its latest time.
    const latest = new Map();
    rows.forEach(function (p) {
      let m = latest.get(p.node || "") || 0;
      p.recorder.calls.forEach(function (k) { m = Math.max(m, k.start_ns, k.end_ns || 0); });
      latest.set(p.node || "", m);
    });
    // The time shown: each rank's last 3 calls (MPI_Init left out when it
    // made others), at most 10 s; then, on the right, the time from the
    // last record to the stop, which the records do not tell: calls still
    // running and requests still pending run into it.
    let span = 0;
    rows.forEach(function (p) {
      const end = latest.get(p.node || "");
      let ks = p.recorder.calls.filter(function (k) { return k.start_ns; });
      const notInit = ks.filter(function (k) { return !/^init/.test(k.call); });
      if (notInit.length) ks = notInit;
      ks = ks.slice(-3);
      if (ks.length) span = Math.max(span, end - ks[0].start_ns);
    });
    span = Math.min(Math.max(span * 1.1, 1e6), 1e10);
    const W = 900, L = 70, RW = W - L - 10, RH = 18, H = shownRows.length * RH + 30;
    const REC = RW * 0.82;
    const x = function (t, node) { return L + REC * (1 - (latest.get(node || "") - t) / span); };
    const svg = sv("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "last MPI calls of every rank" });
    svg.append(sv("rect", { x: L + REC, y: 0, width: RW - REC, height: H - 20, fill: "#f3f4f6" }));
    shownRows.forEach(function (p, i) {
      const y = 4 + i * RH;
      svg.append(sv("text", { "class": "rl", x: 4, y: y + 12, "data-rank": p.world_rank, text: "rank " + p.world_rank, onclick: function () { showRank(p.world_rank); } }));
      const node = p.node || "";
      p.recorder.calls.forEach(function (k) {
        if (!k.start_ns) return;
        const x1 = Math.max(L, x(k.start_ns, node));
        const x2 = k.end_ns ? x(k.end_ns, node) : L + RW;
        if (x2 < L) return;
        const c = "call" + (isCollective(k) ? " coll" : "") + (k.end_ns ? "" : " open");
        svg.append(sv("rect", { "class": c, x: x1, y: y + 2, width: Math.max(2, x2 - x1), height: RH - 6, "data-rank": p.world_rank, "data-call": cName(k.call) },
          [sv("title", { text: "rank " + p.world_rank + ": " + cName(k.call) + (k.end_ns ? ", " + ((k.end_ns - k.start_ns) / 1e6).toFixed(3) + " ms" : ", still in it") })]));
        if (x2 - x1 > 60) svg.append(sv("text", { x: x1 + 3, y: y + 12, fill: "#fff", style: "fill:#fff", text: cName(k.call) }));
      });
      p.recorder.pending.forEach(function (q) {
        if (!q.start_ns) return;
        const x1 = Math.max(L, x(q.start_ns, node));
        svg.append(sv("rect", { "class": "pending", x: x1, y: y + 1, width: Math.max(2, L + RW - x1), height: RH - 4 },
          [sv("title", { text: "rank " + p.world_rank + ": request of " + cName(q.call) + " still pending" })]));
      });
    });
    svg.append(sv("text", { x: L, y: H - 6, text: "−" + (span / 1e9).toFixed(3) + " s" }));
    svg.append(sv("text", { x: L + REC, y: H - 6, "text-anchor": "middle", text: "last record" }));
    svg.append(sv("text", { x: L + RW, y: H - 6, "text-anchor": "end", text: "the stop" }));
    box.append(svg);
    const notes = [];
    if (rows.length > shownRows.length) notes.push(shownRows.length + " of " + rows.length + " ranks shown (those waited on first)");
    if (latest.size > 1) notes.push("each node's ranks on its own clock, ending at its latest record");
    notes.push("red: a call still running at the stop; blue: a collective; dashed amber: a request still pending");
    box.append(el("p", { cls: "note", text: notes.join("; ") + "." }));
    // Which rank entered which collective last.
    const last = new Map();
    rows.forEach(function (p) {
      for (let i = p.recorder.calls.length - 1; i >= 0; i--) {
        const k = p.recorder.calls[i];
        if (isCollective(k) && k.start_ns) {
          const name = cName(k.call);
          const prev = last.get(name);
          const t = (latest.get(p.node || "") - k.start_ns);
          if (!prev || t < prev.t) last.set(name, { rank: p.world_rank, t: t, open: !k.end_ns });
          break;
        }
      }
    });
    if (last.size) {
      const ul = el("ul", { id: "last-collectives" });
      last.forEach(function (v, call) {
        ul.append(el("li", null, ["Last into " + call + ": rank ", rankLink(v.rank), " " + (v.t / 1e6).toFixed(1) + " ms before the stop" + (v.open ? ", still in it" : "")]));
      });
      box.append(ul);
    }
  }

  // ---- search: a rank, a function or a communicator.
  function search(q) {
    q = q.trim();
    const out = $("search-result");
    treeNodes.forEach(function (li) { li.classList.remove("hit"); });
    if (!q) { out.textContent = ""; return; }
    if (/^\d+$/.test(q)) {
      const r = Number(q);
      if (byRank.has(r)) { showRank(r); out.textContent = "rank " + r + " opened below"; }
      else out.textContent = "no rank " + r + " (" + PROCS.length + " ranks)";
      return;
    }
    const needle = q.toLowerCase();
    // Functions: every tree node whose label or location holds it, opened.
    const hits = [];
    (function walk(n, path) {
      const here = path.concat([n]);
      if ((n.label || "").toLowerCase().includes(needle) || (n.location || "").toLowerCase().includes(needle)) hits.push(here);
      (n.children || []).forEach(function (k) { walk(k, here); });
    })(DATA.stack_tree || { children: [] }, []);
    hits.slice(0, 50).forEach(function (path) {
      let lis = document.querySelectorAll("#tree ul.tree > li");
      let li = null;
      path.forEach(function (n) {
        li = Array.from(lis).find(function (x) { return x._data === n; });
        if (!li) return;
        if (n !== path[path.length - 1]) { open(li, null); lis = li._body.querySelectorAll(":scope > ul > li"); }
      });
      if (li) li.classList.add("hit");
    });
    // Communicators: ranks with one of that name or id.
    const comm = [];
    PROCS.forEach(function (p) {
      if (p.comms.some(function (c) { return (c || "").toLowerCase().includes(needle); })) comm.push(p.world_rank);
    });
    out.textContent = "";
    out.append(plural(hits.length, "stack frame", "stack frames") + " match" + (hits.length ? " (highlighted in the tree)" : ""));
    if (comm.length) out.append("; communicator in ranks ", rankLinks(toRanges(comm), 16));
    const first = document.querySelector("#tree .hit");
    if (first) first.scrollIntoView({ block: "center" });
  }

  function drawRaw() {
    const d = $("raw-json");
    d.addEventListener("toggle", function () {
      if (d.open && !d._done) { d._done = true; d.querySelector("pre").textContent = JSON.stringify(DATA, null, 1); }
    });
    $("text-report").textContent = DATA.text || "";
  }

  drawVerdict();
  drawGraph();
  drawTree();
  drawTimeline();
  drawRaw();
  $("search").addEventListener("keydown", function (e) { if (e.key === "Enter") search(e.target.value); });
  $("search").addEventListener("change", function (e) { search(e.target.value); });
  const m = /^#rank-(\d+)$/.exec(location.hash);
  const first = m ? Number(m[1]) : (((A && A.waited_on) || [])[0] || {}).ranks ? A.waited_on[0].ranks[0] : ((A && A.cycles && A.cycles[0]) || [])[0];
  if (first != null && byRank.has(first)) showRank(first, true);
  document.body.dataset.ready = "1";
})();
