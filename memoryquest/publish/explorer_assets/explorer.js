/* MemoryQuest explorer: a static viewer for one generated or published dataset.
 *
 * Data arrives as scripts (browsers refuse fetch() from file://): data/index.js
 * calls MQX.receiveIndex(index) once; data/<persona_id>.js calls
 * MQX.receivePersona(id, persona) when the page injects it, which it does only
 * when that persona is opened. Every piece of data is put into the page as a
 * text node or an attribute value, never as markup.
 *
 * Navigation lives in the URL hash (#p=<persona>&q=<query>&s=<session>, or
 * #view=audit), so the back button and links work.
 */
"use strict";

(function () {
  const state = {
    index: null,
    personaById: new Map(), // id -> index entry
    loaded: new Map(), // id -> prepared persona payload (most recently used last)
    pending: new Map(), // id -> {promise, resolve, reject, script}
    judge: null,
    shown: {}, // the route rendered last
  };
  const KEEP_LOADED = 40; // personas kept in memory; older ones are dropped and reloaded on demand

  // ------------------------------------------------------------------ DOM helpers

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    if (attrs) {
      for (const [key, value] of Object.entries(attrs)) {
        if (value === null || value === undefined || value === false) continue;
        if (key === "class") el.className = value;
        else if (key === "on") for (const [event, fn] of Object.entries(value)) el.addEventListener(event, fn);
        else if (key === "data") for (const [name, v] of Object.entries(value)) el.dataset[name] = String(v);
        else if (value === true) el.setAttribute(key, "");
        else el.setAttribute(key, String(value));
      }
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) append(el, child);
      else if (child instanceof Node) el.appendChild(child);
      else el.appendChild(document.createTextNode(String(child)));
    }
  }

  // replace el's children (arrays flattened, null skipped, strings as text)
  function fill(el, ...children) {
    el.replaceChildren();
    append(el, children);
    return el;
  }

  function $(id) {
    return document.getElementById(id);
  }

  function fmt(value, digits) {
    if (value === null || value === undefined) return "—";
    return Number(value).toFixed(digits === undefined ? 3 : digits);
  }

  function heat(value) {
    if (value === null || value === undefined) return "heat-none";
    return "heat-" + Math.min(4, Math.floor(value * 5));
  }

  function mean(values) {
    const present = values.filter((v) => v !== null && v !== undefined);
    return present.length ? present.reduce((a, b) => a + b, 0) / present.length : null;
  }

  // A collapsible section: <details> that opens on its <summary> title.
  function disclosure(attrs, title, ...content) {
    return h("details", attrs, h("summary", null, title), ...content);
  }

  function tag(text, cls, title) {
    return h("span", { class: "tag " + (cls || ""), title: title }, text);
  }

  // ------------------------------------------------------------------ routing

  function route() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    return { view: params.get("view"), p: params.get("p"), q: params.get("q"), s: params.get("s") };
  }

  function href(target) {
    const params = new URLSearchParams();
    for (const key of ["view", "p", "q", "s"]) if (target[key]) params.set(key, target[key]);
    const text = params.toString();
    return text ? "#" + text : "#";
  }

  function link(target, text, attrs) {
    return h("a", Object.assign({ href: href(target) }, attrs || {}), text);
  }

  // ------------------------------------------------------------------ data loading

  function receiveIndex(index) {
    performance.mark("mqx-index-received");
    state.index = index;
    for (const persona of index.personas) {
      persona.search = [persona.user, persona.id, persona.about].concat(persona.queries.map((q) => q.text)).join("\n").toLowerCase();
      state.personaById.set(persona.id, persona);
    }
    state.judge = index.judges.includes("provenance") ? "provenance" : index.judges[0] || null;
    const select = $("judge");
    for (const judge of index.judges) select.appendChild(h("option", { value: judge }, judge));
    select.value = state.judge || "";
    select.disabled = index.judges.length === 0;
    select.addEventListener("change", () => {
      state.judge = select.value;
      render();
    });
    renderRun();
    renderPersonaList("");
    let timer = null;
    $("filter").addEventListener("input", (event) => {
      clearTimeout(timer);
      timer = setTimeout(() => renderPersonaList(event.target.value), 80);
    });
    performance.mark("mqx-index-rendered");
    document.body.dataset.ready = "index";
    render();
  }

  function prepare(data) {
    data.sessionById = new Map(data.sessions.map((s) => [s.id, s]));
    data.sessionByEvent = new Map(data.sessions.map((s) => [s.event_id, s]));
    data.factById = new Map(data.facts.map((f) => [f.id, f]));
    data.factsBySession = new Map();
    for (const fact of data.facts) {
      for (const sid of fact.sessions) {
        if (!data.factsBySession.has(sid)) data.factsBySession.set(sid, []);
        data.factsBySession.get(sid).push(fact);
      }
    }
    data.queryById = new Map(data.queries.map((q) => [q.id, q]));
    return data;
  }

  function receivePersona(id, data) {
    const entry = state.pending.get(id);
    if (!entry) return; // not asked for (or already dropped)
    state.pending.delete(id);
    remember(id, prepare(data));
    entry.resolve(data);
  }

  function remember(id, data) {
    state.loaded.delete(id);
    state.loaded.set(id, data);
    while (state.loaded.size > KEEP_LOADED) {
      const oldest = state.loaded.keys().next().value;
      state.loaded.delete(oldest);
      const script = document.querySelector('script[data-persona="' + oldest + '"]');
      if (script) script.remove();
    }
  }

  function loadPersona(id) {
    if (state.loaded.has(id)) {
      const data = state.loaded.get(id);
      remember(id, data);
      return Promise.resolve(data);
    }
    if (state.pending.has(id)) return state.pending.get(id).promise;
    if (!state.personaById.has(id)) return Promise.reject(new Error("no persona " + id + " in this dataset"));
    const entry = {};
    entry.promise = new Promise((resolve, reject) => {
      entry.resolve = resolve;
      entry.reject = reject;
    });
    const script = document.createElement("script");
    script.src = "data/" + id + ".js"; // id is one of the index's ids: p_ + 16 hex digits
    script.charset = "utf-8";
    script.dataset.persona = id;
    script.onerror = () => {
      state.pending.delete(id);
      script.remove();
      entry.reject(new Error("could not load data/" + id + ".js"));
    };
    state.pending.set(id, entry);
    document.head.appendChild(script);
    return entry.promise;
  }

  // ------------------------------------------------------------------ header and persona list

  function renderRun() {
    const run = state.index.run;
    const totals = state.index.totals;
    const parts = [
      totals.personas + " personas",
      totals.queries + " queries",
      totals.sessions + " sessions",
      totals.facts + " facts",
    ];
    if (run) {
      parts.push(run.simulated ? "offline simulator (" + run.chat_model + ")" : run.chat_model + " via " + run.backend);
      parts.push("embedder " + run.embedder);
      parts.push("run " + run.run_id);
    }
    $("run").textContent = parts.join(" · ");
  }

  function renderPersonaList(filter) {
    const words = filter.toLowerCase().split(/\s+/).filter(Boolean);
    const list = $("persona-list");
    const items = [];
    let shown = 0;
    let queries = 0;
    const current = route().p;
    for (const persona of state.index.personas) {
      if (words.length && !words.every((w) => persona.search.includes(w))) continue;
      shown += 1;
      queries += persona.queries.length;
      const difficulty = mean(persona.queries.map((q) => q.difficulty));
      items.push(
        h(
          "li",
          null,
          h(
            "a",
            {
              href: href({ p: persona.id }),
              class: "persona-link" + (persona.id === current ? " selected" : ""),
              data: { personaId: persona.id },
            },
            h("span", { class: "persona-user" }, persona.user),
            h("span", { class: "persona-about muted" }, persona.about),
            h(
              "span",
              { class: "persona-stats muted" },
              persona.queries.length + " queries · " + persona.sessions + " sessions" + (difficulty === null ? "" : " · difficulty " + fmt(difficulty, 2)),
            ),
          ),
        ),
      );
    }
    fill(list, items);
    $("persona-count").textContent = shown + " of " + state.index.personas.length + " personas · " + queries + " queries";
  }

  function markSelectedPersona(id) {
    for (const el of document.querySelectorAll("#persona-list a.selected")) el.classList.remove("selected");
    if (!id) return;
    const el = document.querySelector('#persona-list a[data-persona-id="' + CSS.escape(id) + '"]');
    if (el) el.classList.add("selected");
  }

  // ------------------------------------------------------------------ main render

  function render() {
    if (!state.index) return;
    const r = route();
    const audit = r.view === "audit";
    $("tab-data").classList.toggle("active", !audit);
    $("tab-audit").classList.toggle("active", audit);
    $("app").classList.toggle("audit-mode", audit);
    $("audit-view").hidden = !audit;
    $("content").hidden = audit;
    if (audit) {
      $("session-pane").hidden = true;
      renderAudit();
      return;
    }
    markSelectedPersona(r.p);
    const content = $("content");
    if (!r.p) {
      $("session-pane").hidden = true;
      fill(content, renderOverview());
      return;
    }
    const persona = state.personaById.get(r.p);
    if (!persona) {
      fill(content, h("p", { class: "error" }, "There is no persona " + r.p + " in this dataset."));
      $("session-pane").hidden = true;
      return;
    }
    if (!state.loaded.has(r.p)) {
      performance.mark("mqx-persona-requested:" + r.p);
      fill(content, h("p", { class: "muted" }, "Loading " + persona.user + "…"));
      loadPersona(r.p).then(
        () => {
          if (route().p === r.p) render();
        },
        (error) => fill(content, h("p", { class: "error" }, error.message)),
      );
      return;
    }
    const data = state.loaded.get(r.p);
    fill(content, renderPersona(persona, data, r));
    renderSession(persona, data, r);
    if (r.p !== state.shown.p) content.scrollTop = 0;
    else if (r.q && r.q !== state.shown.q) {
      const section = content.querySelector("section.query");
      if (section) section.scrollIntoView({ block: "start" });
    }
    state.shown = r;
    if (performance.getEntriesByName("mqx-persona-rendered:" + r.p).length === 0) {
      performance.mark("mqx-persona-rendered:" + r.p);
    }
    document.body.dataset.ready = "persona";
  }

  function renderOverview() {
    const index = state.index;
    const queries = index.personas.flatMap((p) => p.queries);
    const methods = index.methods;
    const judge = state.judge;
    const rows = methods.map((method, i) => {
      const values = judge ? queries.map((q) => (q.recall[judge] || [])[i]) : [];
      const present = values.filter((v) => v !== null && v !== undefined);
      return h("tr", null, h("th", { scope: "row" }, method.label), h("td", { class: "num" }, present.length), h("td", { class: "num " + heat(mean(present)) }, fmt(mean(present))));
    });
    return h(
      "div",
      { class: "overview" },
      h("h2", null, "Pick a persona"),
      h("p", null, "Each persona has its queries; open one to read its references, timeline, the sessions that carry them, the facts extracted from them and what each retrieval method found."),
      methods.length
        ? h(
            "table",
            { class: "grid compact" },
            h("caption", null, "Mean recall per method (" + judge + " judge)"),
            h("thead", null, h("tr", null, h("th", null, "method"), h("th", null, "queries"), h("th", null, "mean recall"))),
            h("tbody", null, rows),
          )
        : h("p", { class: "muted" }, "This dataset has no validation results."),
      renderWinRates(index.win_rates),
    );
  }

  function percent(value) {
    return value === null || value === undefined ? "—" : (100 * value).toFixed(1) + "%";
  }

  function renderWinRates(report) {
    if (!report) return null;
    if (!report.rows.length) return h("p", { class: "muted" }, "Win Rate: no pair of answers could be judged.");
    const rows = report.rows.map((r) =>
      h(
        "tr",
        null,
        h("th", { scope: "row" }, r.label),
        h("td", { class: "num" }, r.n),
        h("td", { class: "num" }, fmt(r.recall) + " / " + fmt(r.baseline_recall)),
        h("td", { class: "num" }, fmt(r.recall_exact) + " / " + fmt(r.baseline_recall_exact)),
        h("td", { class: "num " + heat(r.win_rate) }, percent(r.win_rate)),
        h("td", { class: "num" }, percent(r.low) + " – " + percent(r.high)),
        h("td", { class: "num" }, percent(r.length_controlled) + " (" + percent(r.lc_low) + " – " + percent(r.lc_high) + ")"),
        h("td", { class: "num" }, percent(r.flip_rate)),
        h("td", { class: "num" }, r.words.join(" / ")),
        h("td", { class: "num" }, r.won_tied_lost.join(" / ")),
      ),
    );
    return h(
      "div",
      { class: "win-rates" },
      h(
        "table",
        { class: "grid compact" },
        h("caption", null, "Win Rate of PGR's answers over each baseline's at the same budget (pairwise judge, both orders; Recall under the " + report.rows[0].judge + " judge)"),
        h("thead", null, h("tr", null, h("th", null, "PGR vs baseline"), h("th", null, "queries"), h("th", null, "Recall (PGR / baseline)"), h("th", null, "RecallExact (PGR / baseline)"), h("th", null, "Win Rate"), h("th", null, "95% CI"), h("th", null, "length-controlled (95% CI)"), h("th", null, "flipped with order"), h("th", null, "words (PGR / baseline)"), h("th", null, "won / tied / lost"))),
        h("tbody", null, rows),
      ),
      h("p", { class: "muted" }, "Win 1, tie 0.5, loss 0, averaged over both orders; 50% = no preference. Both answers from " + report.answer_context + ". Judge: " + (report.judge_model || "unnamed") + (report.judge_sees_references ? ", shown the references." : ", shown the user's profile, not the references.") + " Interval: " + report.interval + " (" + report.bootstrap_samples + " resamples)." + (report.unjudged ? " " + report.unjudged + " pair(s) could not be judged and are left out." : "")),
      report.judge_is_generator ? h("p", { class: "error" }, "The judge is the model that wrote the dataset: it grades its own text.") : null,
    );
  }

  // ------------------------------------------------------------------ persona

  function renderPersona(persona, data, r) {
    const profile = data.persona;
    const demographics = Object.entries(profile.demographics).map(([k, v]) => h("span", { class: "kv" }, h("b", null, k.replace(/_/g, " ") + ": "), v));
    return h(
      "article",
      { class: "persona", data: { personaId: persona.id } },
      h("h2", null, persona.user, " ", h("small", { class: "muted mono" }, persona.id)),
      h(
        "p",
        { class: "muted" },
        (profile.source ? profile.source + " persona · " : "") + persona.queries.length + " queries · " + data.sessions.length + " sessions · " + data.facts.length + " facts · " + data.rejected.length + " rejected candidates",
      ),
      disclosure(
        { class: "profile" },
        "Profile",
        h("p", null, demographics),
        profile.interests.length ? h("p", null, h("b", null, "Interests: "), profile.interests.join(", ")) : null,
        profile.affinities.length
          ? h(
              "table",
              { class: "grid compact" },
              h("thead", null, h("tr", null, h("th", null, "domain"), h("th", null, "affinity"), h("th", null, "values"))),
              h("tbody", null, profile.affinities.map(([domain, name, values]) => h("tr", null, h("td", null, domain), h("td", null, name), h("td", null, values.join(", "))))),
            )
          : null,
        profile.interactions.map(([domain, summary]) => h("p", { class: "interaction" }, h("b", null, domain + ": "), summary)),
      ),
      renderQueryTable(persona, r),
      r.q ? renderQuery(persona, data, r) : h("p", { class: "muted hint" }, "Select a query to see its references, timeline and retrieval."),
      renderHistory(data, r),
      renderRejected(data),
    );
  }

  function renderQueryTable(persona, r) {
    const methods = state.index.methods;
    const judge = state.judge;
    const head = h(
      "tr",
      null,
      h("th", null, "#"),
      h("th", null, "date"),
      h("th", null, "request"),
      h("th", { title: "γ = mean cosine(query, reference)" }, "γ"),
      h("th", { title: "cosine(query, reference) per reference" }, "cosines"),
      h("th", { title: "query-only recall under the provenance judge (1 = easy)" }, "difficulty"),
      methods.map((m) => h("th", { class: "method", title: m.label + " — recall (" + judge + " judge)" }, m.short)),
    );
    const rows = persona.queries.map((q) => {
      const recall = (judge && q.recall[judge]) || [];
      return h(
        "tr",
        { class: "query-row" + (q.id === r.q ? " selected" : ""), data: { queryId: q.id } },
        h("td", { class: "num" }, q.rank),
        h("td", { class: "nowrap" }, q.date),
        h("td", { class: "request" }, link({ p: persona.id, q: q.id }, q.text, { class: "query-link", title: q.text, data: { queryId: q.id } }), h("span", { class: "muted" }, " " + q.domain)),
        h("td", { class: "num" }, fmt(q.gamma)),
        h("td", { class: "cosines" }, q.cosines.map((c) => h("span", { class: "cos" }, fmt(c, 2)))),
        h("td", { class: "num " + heat(q.difficulty) }, fmt(q.difficulty, 2)),
        methods.map((m, i) => h("td", { class: "num " + heat(recall[i]) }, fmt(recall[i], 2))),
      );
    });
    return h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: "grid queries" },
        h("caption", null, "Queries (recall per method, " + judge + " judge)"),
        h("thead", null, head),
        h("tbody", null, rows.length ? rows : h("tr", null, h("td", { colspan: 6 + methods.length, class: "muted" }, "No queries."))),
      ),
    );
  }

  function renderHistory(data, r) {
    return disclosure(
      { class: "history" },
      "Conversation history (" + data.sessions.length + " sessions, oldest first)",
      h(
        "ol",
        { class: "history-list" },
        data.sessions.map((s) =>
          h(
            "li",
            { class: s.id === r.s ? "selected" : null },
            link({ p: r.p, q: s.query_id, s: s.id }, s.date + " · " + s.domain, { data: { sessionId: s.id } }),
            s.reference_id ? tag("reference", "kind-reference") : tag("filler", "kind-filler"),
            h("span", { class: "muted" }, " " + s.turns.length + " turns"),
          ),
        ),
      ),
    );
  }

  function renderRejected(data) {
    if (!data.rejected.length) return null;
    return disclosure(
      { class: "rejected" },
      "Rejected candidates (" + data.rejected.length + ")",
      h(
        "table",
        { class: "grid compact" },
        h("thead", null, h("tr", null, h("th", null, "stage"), h("th", null, "reason"), h("th", null, "γ"), h("th", null, "detail"))),
        h("tbody", null, data.rejected.map((x) => h("tr", null, h("td", null, x.stage), h("td", null, x.reason), h("td", { class: "num" }, fmt(x.gamma)), h("td", null, x.detail)))),
      ),
    );
  }

  // ------------------------------------------------------------------ one query

  function referenceLabels(detail) {
    const labels = new Map();
    detail.references.forEach((ref, i) => labels.set(ref.id, "R" + (i + 1)));
    return labels;
  }

  function judged(retrieval) {
    return retrieval.judges.find((j) => j.judge === state.judge) || null;
  }

  // [found, reason, supporting facts] for the query's refIndex-th reference under the current judge
  function verdictOf(retrieval, refIndex) {
    const j = judged(retrieval);
    return j ? j.verdicts[refIndex] || null : null;
  }

  // retrieval results name facts by their position in data.facts (or by id when the fact is not there)
  function factOf(data, ref) {
    return typeof ref === "number" ? data.facts[ref] : data.factById.get(ref);
  }

  function factId(data, ref) {
    const fact = factOf(data, ref);
    return fact ? fact.id : String(ref);
  }

  function renderQuery(persona, data, r) {
    const q = persona.queries.find((x) => x.id === r.q);
    const detail = data.queryById.get(r.q);
    if (!q || !detail) return h("p", { class: "error" }, "Query " + r.q + " is not one of " + persona.user + "'s queries.");
    const labels = referenceLabels(detail);
    const sessionFor = (refId) => data.sessions.find((s) => s.reference_id === refId && s.query_id === q.id) || data.sessions.find((s) => s.reference_id === refId);
    return h(
      "section",
      { class: "query", data: { queryId: q.id } },
      h("h3", null, "Request"),
      h("blockquote", { class: "request-text" }, q.text),
      h(
        "p",
        { class: "meta" },
        "asked " + q.date + " · " + q.domain + " · γ " + fmt(q.gamma) + " · difficulty " + fmt(q.difficulty, 2) + " · rank " + q.rank + " · embedder " + detail.embedder,
      ),
      disclosure(null, "Generator's reasoning", h("p", null, detail.reasoning)),
      renderReferences(q, detail, labels, sessionFor, r),
      renderTimeline(q, detail, data, labels, r),
      renderRetrieval(detail, data, labels),
    );
  }

  function renderReferences(q, detail, labels, sessionFor, r) {
    const retrievals = detail.retrievals;
    const rows = detail.references.map((ref, refIndex) => {
      const session = sessionFor(ref.id);
      const expired = ref.valid_until && ref.valid_until < q.date;
      const found = retrievals.map((ret) => {
        const verdict = verdictOf(ret, refIndex);
        if (!verdict) return null;
        const method = methodInfo(ret.key);
        return tag((verdict[0] ? "✓ " : "✗ ") + method.short, verdict[0] ? "found" : "missed", method.label + ": " + (verdict[1] || (verdict[0] ? "found" : "not found")));
      });
      return h(
        "tr",
        { class: "reference-row", data: { referenceId: ref.id } },
        h("td", null, h("b", null, labels.get(ref.id))),
        h(
          "td",
          { class: "reference-text" },
          h("div", null, ref.text),
          ref.rationale ? h("div", { class: "why" }, h("b", null, "Rationale: "), ref.rationale) : null,
          ref.relevance ? h("div", { class: "why" }, h("b", null, "Judge: "), ref.relevance) : null,
          h("div", { class: "found-by" }, found),
        ),
        h("td", null, ref.domain),
        h("td", { class: "nowrap" }, ref.date),
        h("td", { class: "nowrap" + (expired ? " expired" : "") }, ref.valid_until || "—", expired ? h("div", null, "expired before the query") : null),
        h("td", { class: "num" }, fmt(ref.cosine)),
        h(
          "td",
          null,
          session
            ? link({ p: r.p, q: r.q, s: session.id }, "open session", { class: "session-link" + (session.id === r.s ? " selected" : ""), data: { sessionId: session.id, referenceId: ref.id } })
            : h("span", { class: "error" }, "no session"),
        ),
      );
    });
    return h(
      "div",
      null,
      h("h3", null, "References"),
      h(
        "table",
        { class: "grid references" },
        h(
          "thead",
          null,
          h("tr", null, h("th", null, ""), h("th", null, "reference · rationale · judge"), h("th", null, "domain"), h("th", null, "date"), h("th", null, "valid until"), h("th", null, "cosine"), h("th", null, "session")),
        ),
        h("tbody", null, rows),
      ),
    );
  }

  function renderTimeline(q, detail, data, labels, r) {
    if (!detail.timeline) return h("div", null, h("h3", null, "Timeline"), h("p", { class: "muted" }, "No timeline."));
    const items = detail.timeline.events.map((event) => {
      const session = data.sessionByEvent.get(event.id);
      return h(
        "li",
        { class: "event kind-" + event.kind + (session && session.id === r.s ? " selected" : "") },
        h("span", { class: "nowrap event-date" }, event.date),
        " ",
        tag(event.kind, "kind-" + event.kind),
        event.reference_id ? tag(labels.get(event.reference_id) || event.reference_id, "ref") : null,
        h("span", { class: "muted" }, " " + event.domain + " "),
        session ? link({ p: r.p, q: r.q, s: session.id }, "session", { class: "session-link", data: { sessionId: session.id } }) : h("span", { class: "error" }, "no session"),
        h("div", { class: "event-description" }, event.description),
      );
    });
    items.push(h("li", { class: "event query-date" }, h("span", { class: "nowrap event-date" }, q.date), " ", tag("query", "kind-query"), h("span", null, " the request is asked")));
    return h("div", null, h("h3", null, "Timeline"), h("ol", { class: "timeline" }, items));
  }

  function methodInfo(key) {
    return state.index.methods.find((m) => m.key === key) || { key: key, label: key, short: key };
  }

  function renderRetrieval(detail, data, labels) {
    if (!detail.retrievals.length) return h("div", null, h("h3", null, "Retrieval"), h("p", { class: "muted" }, "No validation results for this query."));
    const refs = detail.references;
    const head = h(
      "tr",
      null,
      h("th", null, "method"),
      h("th", { title: "facts the method was allowed to return" }, "budget"),
      h("th", { title: "facts in memory on the query date" }, "memory"),
      h("th", null, "retrieved"),
      h("th", null, "recall"),
      h("th", null, "exact"),
      h("th", null, "nDCG"),
      refs.map((ref) => h("th", { title: ref.text }, labels.get(ref.id))),
    );
    const rows = detail.retrievals.map((ret) => {
      const method = methodInfo(ret.key);
      const j = judged(ret);
      const retrieved = (j && j.retrieved) || ret.retrieved;
      return h(
        "tr",
        { data: { method: ret.key } },
        h("th", { scope: "row", title: method.label }, method.label),
        h("td", { class: "num" }, ret.budget),
        h("td", { class: "num" }, ret.memory_size),
        h("td", { class: "num" }, retrieved.length),
        h("td", { class: "num " + heat(j ? j.recall : null) }, j ? fmt(j.recall, 2) : "—"),
        h("td", null, j ? (j.exact ? "yes" : "no") : "—"),
        h("td", { class: "num" }, j ? fmt(j.ndcg, 2) : "—"),
        refs.map((ref, refIndex) => {
          const verdict = verdictOf(ret, refIndex);
          if (!verdict) return h("td", { class: "muted" }, "—");
          return h("td", { class: verdict[0] ? "found" : "missed", title: verdict[1] || "" }, verdict[0] ? "✓" : "✗");
        }),
      );
    });
    const lists = detail.retrievals.map((ret) => renderRetrievedFacts(ret, detail, data, labels));
    return h(
      "div",
      null,
      h("h3", null, "Retrieval (" + state.judge + " judge)"),
      h("div", { class: "scroll" }, h("table", { class: "grid retrieval" }, h("thead", null, head), h("tbody", null, rows))),
      lists,
    );
  }

  function renderRetrievedFacts(ret, detail, data, labels) {
    const method = methodInfo(ret.key);
    const j = judged(ret);
    const retrieved = (j && j.retrieved) || ret.retrieved;
    const supporting = new Map(); // fact id -> reference ids it covers
    if (j) {
      j.verdicts.forEach((verdict, refIndex) => {
        if (!verdict) return;
        const refId = detail.references[refIndex].id;
        for (const ref of verdict[2]) {
          const fid = factId(data, ref);
          supporting.set(fid, (supporting.get(fid) || []).concat([refId]));
        }
      });
    }
    const items = retrieved.map((ref) => {
      const fact = factOf(data, ref);
      const fid = factId(data, ref);
      const supports = supporting.get(fid) || [];
      return h(
        "li",
        { class: "fact" + (supports.length ? " supports" : ""), data: { factId: fid } },
        fact ? fact.info : h("span", { class: "error" }, "fact " + fid + " is not in this persona's memory"),
        " ",
        fact ? h("span", { class: "muted" }, fact.type + " · " + fact.created_on) : null,
        supports.map((refId) => tag("covers " + (labels.get(refId) || refId), "found")),
        fact ? fact.references.filter((refId) => !supports.includes(refId)).map((refId) => tag("credited " + (labels.get(refId) || "other query's reference"), "credited", refId)) : null,
      );
    });
    const reasons = j
      ? j.verdicts.map((verdict, refIndex) => (verdict ? h("li", null, h("b", null, "R" + (refIndex + 1)), verdict[0] ? " found: " : " missed: ", verdict[1] || "—") : null))
      : [];
    return disclosure(
      { class: "retrieved", data: { method: ret.key } },
      method.label + ": " + retrieved.length + " facts retrieved" + (supporting.size ? ", " + supporting.size + " cover a reference" : ""),
      ret.augmented_query ? h("p", null, h("b", null, "Augmented query: "), ret.augmented_query) : null,
      ret.summary ? h("p", null, h("b", null, "Summary: "), ret.summary) : null,
      ret.steps
        ? disclosure(
            { class: "steps" },
            "Prospection steps (" + ret.steps.length + ")",
            h("ol", null, ret.steps.map(([iteration, stepId, parent, action, count]) => h("li", null, h("span", { class: "muted" }, "round " + iteration + " · " + stepId + (parent ? " ← " + parent : "") + " · " + count + " facts · "), action))),
          )
        : null,
      reasons.length ? h("ul", { class: "judgements" }, reasons) : null,
      h("ol", { class: "fact-list" }, items),
    );
  }

  // ------------------------------------------------------------------ one session

  function highlight(content, spans) {
    // spans are [start, end) in Unicode code points (Python string offsets), not UTF-16 units
    const chars = Array.from(content);
    const nodes = [];
    let position = 0;
    for (const [start, end] of spans.slice().sort((a, b) => a[0] - b[0])) {
      const from = Math.max(start, position);
      const to = Math.min(end, chars.length);
      if (to <= from) continue;
      if (from > position) nodes.push(chars.slice(position, from).join(""));
      nodes.push(h("mark", { class: "ref-span", data: { start: start, end: end } }, chars.slice(from, to).join("")));
      position = to;
    }
    if (position < chars.length) nodes.push(chars.slice(position).join(""));
    return nodes;
  }

  function renderSession(persona, data, r) {
    const pane = $("session-pane");
    if (!r.s) {
      pane.hidden = true;
      fill(pane);
      return;
    }
    pane.hidden = false;
    const session = data.sessionById.get(r.s);
    const close = link({ p: r.p, q: r.q }, "close", { class: "close", title: "close the session" });
    if (!session) {
      fill(pane, close, h("p", { class: "error" }, "Session " + r.s + " is not in " + persona.user + "'s history."));
      return;
    }
    const detail = data.queryById.get(r.q);
    const labels = detail ? referenceLabels(detail) : new Map();
    const reference = detail && session.reference_id ? detail.references.find((x) => x.id === session.reference_id) : null;
    const spansByTurn = new Map();
    const problems = [];
    for (const [turn, start, end] of session.spans) {
      if (turn >= session.turns.length || end > Array.from(session.turns[turn][1]).length || start >= end) problems.push("span [" + start + ", " + end + ") of turn " + turn + " is outside the turn");
      if (!spansByTurn.has(turn)) spansByTurn.set(turn, []);
      spansByTurn.get(turn).push([start, end]);
    }
    const turns = session.turns.map(([role, content], i) => {
      const spans = spansByTurn.get(i) || [];
      const isReferenceTurn = session.reference_turns.includes(i);
      return h(
        "li",
        { class: "turn role-" + role + (isReferenceTurn ? " reference-turn" : ""), data: { turnIndex: i } },
        h("div", { class: "turn-head muted" }, "turn " + i + " · " + role + (isReferenceTurn ? " · states the reference" : "")),
        h("p", { class: "turn-content" }, spans.length ? highlight(content, spans) : content),
      );
    });
    const facts = data.factsBySession.get(session.id) || [];
    const factItems = facts.map((fact) => {
      const credited = fact.references.length > 0;
      const creditsThis = session.reference_id && fact.references.includes(session.reference_id);
      return h(
        "li",
        { class: "fact" + (credited ? " credited" : "") + (creditsThis ? " credits-this" : ""), data: { factId: fact.id } },
        fact.info,
        " ",
        h("span", { class: "muted" }, fact.type + " · " + fact.created_on + (fact.status !== "active" ? " · " + fact.status + (fact.merged_into ? " into " + fact.merged_into : "") : "")),
        fact.references.map((refId) => tag("credited to " + (labels.get(refId) || refId), creditsThis && refId === session.reference_id ? "found" : "credited", refId)),
      );
    });
    fill(
      pane,
      close,
      h("h3", null, "Session " + session.date + " · " + session.domain),
      h("p", { class: "muted mono" }, session.id + " · #" + session.position + " in the history · " + session.turns.length + " turns"),
      session.reference_id
        ? h("p", { class: "carries" }, "Carries ", h("b", null, labels.get(session.reference_id) || "a reference of another query"), reference ? ": " + reference.text : " (" + session.reference_id + ")")
        : h("p", { class: "muted" }, "Filler session: no reference."),
      problems.map((p) => h("p", { class: "error" }, p)),
      session.reference_id && !session.spans.length ? h("p", { class: "muted" }, "No reference sentence recorded; the reference turns are outlined.") : null,
      h("ol", { class: "dialogue", start: 0 }, turns),
      h("h4", null, "Facts extracted from this session (" + facts.length + ")"),
      factItems.length ? h("ul", { class: "session-facts" }, factItems) : h("p", { class: "muted" }, "None."),
    );
    const mark = pane.querySelector("mark.ref-span");
    if (mark && mark.scrollIntoView) mark.scrollIntoView({ block: "center" });
  }

  // ------------------------------------------------------------------ audit and plots

  function renderValue(value, depth) {
    if (value === null || value === undefined) return h("span", { class: "muted" }, "—");
    if (typeof value === "boolean") return value ? "yes" : "no";
    if (typeof value === "number") return Number.isInteger(value) ? String(value) : fmt(value);
    if (typeof value !== "object") return String(value);
    if (depth > 5) return h("code", null, JSON.stringify(value));
    if (Array.isArray(value)) {
      if (!value.length) return h("span", { class: "muted" }, "(none)");
      const flat = value.every((v) => v && typeof v === "object" && !Array.isArray(v) && Object.values(v).every((x) => x === null || typeof x !== "object"));
      if (flat) {
        const keys = Array.from(new Set(value.flatMap((v) => Object.keys(v))));
        const shown = value.slice(0, 200);
        return h(
          "div",
          null,
          h(
            "table",
            { class: "grid compact" },
            h("thead", null, h("tr", null, keys.map((k) => h("th", null, k)))),
            h("tbody", null, shown.map((v) => h("tr", null, keys.map((k) => h("td", null, renderValue(v[k], depth + 1)))))),
          ),
          value.length > shown.length ? h("p", { class: "muted" }, "… and " + (value.length - shown.length) + " more") : null,
        );
      }
      return h("ul", null, value.slice(0, 200).map((v) => h("li", null, renderValue(v, depth + 1))));
    }
    return h("dl", { class: "kv-list" }, Object.entries(value).map(([k, v]) => [h("dt", null, k), h("dd", null, renderValue(v, depth + 1))]));
  }

  function renderChecks(checks) {
    return h(
      "table",
      { class: "grid checks" },
      h("thead", null, h("tr", null, h("th", null, "check"), h("th", null, "value"), h("th", null, "limit"), h("th", null, "result"), h("th", null, "detail"))),
      h(
        "tbody",
        null,
        checks.map((c) => {
          const gated = c.threshold !== null && c.threshold !== undefined;
          const targeted = typeof c.target === "string";
          const limit = targeted
            ? "target " + c.target
            : gated && c.fails_if ? "fails if " + (c.fails_if === ">=" ? "≥ " : "> ") + renderValue(c.threshold, 9) : "—";
          const result = targeted
            ? c.on_target === true ? "met" : c.on_target === false ? "missed" : "—"
            : gated ? (c.passed ? "pass" : "FAIL") : "—";
          const tone = targeted ? (c.on_target === false ? "fail" : c.on_target ? "pass" : "") : gated ? (c.passed ? "pass" : "fail") : "";
          return h(
            "tr",
            { class: tone },
            h("td", { class: "mono" }, c.name),
            h("td", { class: "num" }, renderValue(c.value, 9)),
            h("td", null, limit),
            h("td", null, result),
            h("td", null, c.detail),
          );
        }),
      ),
    );
  }

  function renderAudit() {
    const index = state.index;
    const audit = index.audit;
    const parts = [h("h2", null, "Validity audit")];
    if (!audit) {
      parts.push(h("p", { class: "muted" }, "This dataset's manifest records no audit. Run `memoryquest audit DIR --write` to measure it."));
    } else {
      if (typeof audit.passed === "boolean") {
        parts.push(h("p", { class: "verdict " + (audit.passed ? "pass" : "fail") }, audit.passed ? "Passed" : "Failed", Array.isArray(audit.failures) && audit.failures.length ? " — " + audit.failures.length + " failed gate(s)" : ""));
      }
      if (Array.isArray(audit.failures) && audit.failures.length) parts.push(h("ul", { class: "failures" }, audit.failures.map((f) => h("li", null, String(f)))));
      if (Array.isArray(audit.targets_missed) && audit.targets_missed.length) {
        parts.push(h("p", { class: "verdict fail" }, "Benchmark targets missed: " + audit.targets_missed.length + " (a missed target fails nothing)"));
        parts.push(h("ul", { class: "failures" }, audit.targets_missed.map((f) => h("li", null, String(f)))));
      }
      if (Array.isArray(audit.checks)) parts.push(renderChecks(audit.checks));
      for (const [key, value] of Object.entries(audit)) {
        if (key === "passed" || key === "failures" || key === "checks" || key === "targets_missed") continue;
        parts.push(disclosure({ class: "audit-section" }, key.replace(/_/g, " "), renderValue(value, 0)));
      }
    }
    const run = index.run;
    if (run) {
      parts.push(h("h3", null, "Run"), renderValue(run, 0));
    }
    const plots = index.plots.length
      ? index.plots.map((p) => h("figure", null, h("img", { src: p.src, alt: p.caption, loading: "lazy" }), h("figcaption", null, p.caption)))
      : [h("p", { class: "muted" }, "No plots: they are drawn when the dataset is published.")];
    fill($("audit-view"), h("div", { class: "audit-results" }, parts), h("div", { class: "plots" }, h("h2", null, "Plots"), plots));
  }

  // ------------------------------------------------------------------ start

  window.MQX = Object.freeze({ receiveIndex: receiveIndex, receivePersona: receivePersona });
  window.addEventListener("hashchange", render);
  window.addEventListener("load", () => {
    if (!state.index) fill($("content"), h("p", { class: "error" }, "Could not load data/index.js: is the explorer folder complete?"));
  });
})();
