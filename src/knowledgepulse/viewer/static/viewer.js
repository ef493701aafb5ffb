// The knowledgepulse trace viewer: plain JavaScript over the /v1 API of its own origin.
// Views are client-side routes: #/ (the table, its state in the query: #/?sort=-value&domain=x),
// #/search?text=..., #/trace/<id>, #/compare?a=<id>&b=<id>, #/runs?a=<file>&b=<file> and
// #/groups. Every text from the API is set as text
// (textContent), never parsed as HTML.
"use strict";

(function () {
  const API = "/v1";
  const KEY_STORAGE = "knowledgepulse.apiKey";
  const PAGE_SIZE = 50;
  const SEARCH_HITS = 20;
  // The sorts every server of the API answers; others may be refused, and are then done
  // within the page.
  const CONTRACT_SORTS = ["value", "added_at"];
  const COLUMNS = [
    { key: "id", label: "Trace", sort: "id", ascendingFirst: true },
    { key: "domain", label: "Domain", sort: "domain", ascendingFirst: true },
    { key: "value", label: "Value", sort: "value", number: true },
    { key: "complexity", label: "Complexity", sort: "complexity", number: true },
    { key: "novelty", label: "Novelty", sort: "novelty", number: true },
    { key: "nearest", label: "Nearest trace" },
    { key: "tool_diversity", label: "Tool diversity", sort: "tool_diversity", number: true },
    { key: "outcome", label: "Outcome", sort: "outcome", number: true },
    { key: "success", label: "Success", sort: "success" },
    { key: "added_at", label: "Added", sort: "added_at", optional: true },
  ];

  const main = document.getElementById("main");
  const statusLine = document.getElementById("status");
  const errorLine = document.getElementById("error");
  let renderCount = 0;
  let statsPromise = null;
  let pendingKey = null;
  let sessionKey = null; // the key, when local storage is disabled

  // ---- DOM helpers -------------------------------------------------------------------------

  function h(tag, attrs, ...children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") element.className = value;
      else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
      else element.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      element.append(child instanceof Node ? child : String(child));
    }
    return element;
  }

  function number(value, digits = 3) {
    return value === null || value === undefined ? "—" : Number(value).toFixed(digits);
  }

  function yesNo(value) {
    return value === true ? "yes" : value === false ? "no" : "—";
  }

  function traceHref(id) {
    return "#/trace/" + encodeURIComponent(id);
  }

  function traceLink(id) {
    return h("a", { href: traceHref(id), class: "trace-id" }, id);
  }

  function definitions(pairs) {
    return h(
      "dl",
      { class: "facts" },
      pairs.filter((pair) => pair).map(([term, value]) => [h("dt", null, term), h("dd", null, value)])
    );
  }

  function table(caption, headers, rows, className) {
    return h(
      "table",
      { class: className || null },
      h("caption", null, caption),
      h("thead", null, h("tr", null, headers.map((label) => h("th", { scope: "col" }, label)))),
      h("tbody", null, rows)
    );
  }

  // ---- the API -----------------------------------------------------------------------------

  function storedKey() {
    try {
      return window.localStorage.getItem(KEY_STORAGE);
    } catch (_) {
      return null; // storage disabled: ask each time
    }
  }

  function heldKey() {
    return storedKey() || sessionKey;
  }

  // The header's "Forget the API key" shows while this browser holds one.
  function showForgetKey() {
    document.getElementById("forget-key").hidden = !heldKey();
  }

  function forgetKey() {
    try {
      window.localStorage.removeItem(KEY_STORAGE);
    } catch (_) {
      // storage disabled: the key was only in sessionKey
    }
    sessionKey = null;
    statsPromise = null;
    main.replaceChildren();
    showForgetKey();
    render(); // a server that needs a key asks for one again
  }

  function askForKey(refused) {
    if (pendingKey) return pendingKey;
    const dialog = document.getElementById("key-dialog");
    const form = document.getElementById("key-form");
    const input = document.getElementById("key-input");
    const old = dialog.querySelector(".refused");
    if (old) old.remove();
    if (refused) form.insertBefore(h("p", { class: "refused" }, "That key was refused."), input.previousElementSibling);
    pendingKey = new Promise((resolve, reject) => {
      function submitted(event) {
        event.preventDefault();
        const key = input.value.trim();
        if (!key) return;
        try {
          window.localStorage.setItem(KEY_STORAGE, key);
        } catch (_) {
          sessionKey = key;
        }
        finish();
        showForgetKey();
        resolve();
      }
      function cancelled() {
        finish();
        reject(new Error("An API key is needed to read the traces."));
      }
      function finish() {
        form.removeEventListener("submit", submitted);
        dialog.removeEventListener("cancel", cancelled);
        input.value = "";
        if (dialog.open) dialog.close();
        pendingKey = null;
      }
      form.addEventListener("submit", submitted);
      dialog.addEventListener("cancel", cancelled);
      dialog.showModal();
      input.focus();
    });
    return pendingKey;
  }

  async function api(path, options) {
    for (;;) {
      const key = heldKey();
      const headers = { Accept: "application/json" };
      if (options && options.body) headers["Content-Type"] = "application/json";
      if (key) headers.Authorization = "Bearer " + key;
      const response = await fetch(API + path, Object.assign({}, options, { headers }));
      if (response.status === 401) {
        await askForKey(Boolean(key));
        continue;
      }
      const body = await response.json().catch(() => null);
      if (!response.ok) {
        const error = new Error(detailOf(body) || response.status + " " + response.statusText);
        error.status = response.status;
        throw error;
      }
      return body;
    }
  }

  function detailOf(body) {
    if (!body || body.detail === undefined) return null;
    if (Array.isArray(body.detail)) return body.detail.map((d) => d.msg || JSON.stringify(d)).join("; ");
    return String(body.detail);
  }

  function stats() {
    if (!statsPromise) statsPromise = api("/stats").catch(() => ({}));
    return statsPromise;
  }

  // ---- routing -----------------------------------------------------------------------------

  function route() {
    const raw = location.hash.replace(/^#\/?/, "");
    const cut = raw.indexOf("?");
    const path = cut === -1 ? raw : raw.slice(0, cut);
    const params = new URLSearchParams(cut === -1 ? "" : raw.slice(cut + 1));
    if (path.startsWith("trace/")) return { view: "trace", id: decodeURIComponent(path.slice(6)) };
    if (path === "groups") return { view: "groups" };
    if (path === "compare") return { view: "compare", a: params.get("a") || "", b: params.get("b") || "" };
    if (path === "runs")
      return { view: "runs", a: params.get("a") || "", b: params.get("b") || "", by: params.get("by") || "id" };
    if (path === "search") return { view: "search", text: params.get("text") || "" };
    return { view: "traces", params };
  }

  async function render() {
    const token = ++renderCount;
    const where = route();
    errorLine.hidden = true;
    errorLine.textContent = "";
    statusLine.textContent = "Loading…";
    for (const [id, views] of [["nav-traces", ["traces"]], ["nav-groups", ["groups"]], ["nav-compare", ["compare", "runs"]]]) {
      const link = document.getElementById(id);
      if (!link) continue;
      if (views.includes(where.view)) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    let content;
    try {
      if (where.view === "trace") content = await traceView(where.id);
      else if (where.view === "groups") content = await groupsView();
      else if (where.view === "compare") content = await compareView(where.a, where.b);
      else if (where.view === "runs") content = await runsView(where.a, where.b, where.by);
      else if (where.view === "search") content = await searchView(where.text);
      else content = await tracesView(where.params);
    } catch (error) {
      if (token !== renderCount) return;
      statusLine.textContent = "";
      errorLine.textContent = error.message;
      errorLine.hidden = false;
      return;
    }
    if (token !== renderCount) return; // a later navigation is being drawn
    main.replaceChildren(...content.nodes.flat(2).filter((node) => node));
    document.title = content.title + " · knowledgepulse";
    statusLine.textContent = content.status || "";
    const heading = main.querySelector("h1");
    if (heading) {
      heading.setAttribute("tabindex", "-1");
      heading.focus({ preventScroll: false });
    }
  }

  // ---- the traces table --------------------------------------------------------------------

  function tracesHash(state) {
    const params = new URLSearchParams();
    for (const name of ["sort", "domain", "q", "min", "max"]) if (state[name]) params.set(name, state[name]);
    if (state.offset) params.set("offset", String(state.offset));
    const query = params.toString();
    return "#/" + (query ? "?" + query : "");
  }

  function sortLocally(items, sort) {
    const key = sort.replace(/^-/, "");
    const direction = sort.startsWith("-") ? -1 : 1;
    return items.slice().sort((a, b) => {
      const x = a[key], y = b[key];
      if (x === y) return a.id < b.id ? -1 : 1;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * direction;
    });
  }

  async function tracesView(params) {
    const state = {
      sort: params.get("sort") || "-value",
      domain: params.get("domain") || "",
      q: params.get("q") || "",
      min: params.get("min") || "",
      max: params.get("max") || "",
      offset: Math.max(0, parseInt(params.get("offset") || "0", 10) || 0),
    };
    const query = new URLSearchParams({ sort: state.sort, limit: String(PAGE_SIZE), offset: String(state.offset) });
    if (state.domain) query.set("domain", state.domain);
    if (state.q) query.set("q", state.q);
    if (state.min) query.set("value_min", state.min);
    if (state.max) query.set("value_max", state.max);
    let page;
    let note = null;
    try {
      page = await api("/traces?" + query);
    } catch (error) {
      const bare = state.sort.replace(/^-/, "");
      if (!(error.status === 400 || error.status === 422) || CONTRACT_SORTS.includes(bare)) throw error;
      query.set("sort", "-value");
      page = await api("/traces?" + query);
      page.items = sortLocally(page.items, state.sort);
      note = "This server sorts by value and date added only: the rows are sorted within this page.";
    }
    // A server that ignores value_min / value_max returns every row: keep the range here too.
    const low = state.min === "" ? -Infinity : Number(state.min);
    const high = state.max === "" ? Infinity : Number(state.max);
    const items = page.items.filter(
      (item) => (state.min === "" && state.max === "") || (item.value !== null && item.value >= low && item.value <= high)
    );
    const info = await stats();
    const first = page.total === 0 ? 0 : state.offset + 1;
    const last = state.offset + page.items.length;
    const sorted = COLUMNS.find((c) => c.sort === state.sort.replace(/^-/, ""));
    const caption =
      `Traces ${first}–${last} of ${page.total}` +
      (sorted ? `, sorted by ${sorted.label.toLowerCase()} (${state.sort.startsWith("-") ? "descending" : "ascending"})` : "");
    return {
      title: "Traces",
      status: `${page.total} traces match.`,
      nodes: [
        h("h1", null, "Traces"),
        summaryLine(info),
        filtersForm(state, info),
        note && h("p", { class: "note" }, note),
        items.length ? tracesTable(items, state, caption) : h("p", { class: "empty" }, "No trace matches these filters."),
        pager(state, page.total),
      ],
    };
  }

  // What this key cannot see, and why: kp serve counts the traces hidden by their visibility
  // and names the key asking (kp view, which reads files, has neither).
  function whoSees(info) {
    const notes = [];
    if (typeof info.hidden === "number" && info.hidden > 0) {
      notes.push(
        `${info.hidden} more ${info.hidden === 1 ? "trace is" : "traces are"} in the base but hidden from this key by their visibility ` +
          "(private: only the key that contributed it; org: only keys of its team)."
      );
    }
    if (info.key && typeof info.key.name === "string") {
      const team = info.key.team ? `team ${info.key.team}` : "no team";
      notes.push(`This key: ${info.key.name}, scope ${info.key.scope}, ${team}.`);
    }
    return notes.length ? h("span", { class: "visibility" }, " " + notes.join(" ")) : null;
  }

  function summaryLine(info) {
    if (!info || typeof info.traces !== "number") return null;
    const parts = [`${info.traces} traces`];
    for (const [name, label] of [["scored", "scored"], ["with_steps", "with steps"], ["evaluated", "evaluated"], ["groups", "groups"]]) {
      if (typeof info[name] === "number") parts.push(`${info[name]} ${label}`);
    }
    if (Array.isArray(info.files)) parts.push(`from ${info.files.length} files`);
    const line = h("p", { class: "summary" }, parts.join(" · "), whoSees(info));
    if (Array.isArray(info.skipped) && info.skipped.length) {
      return [
        line,
        h(
          "details",
          { class: "skipped" },
          h("summary", null, `${info.skipped.length} lines could not be shown`),
          h("ul", null, info.skipped.map((reason) => h("li", null, reason)))
        ),
      ];
    }
    return line;
  }

  function filtersForm(state, info) {
    const domains = info && info.by_domain && typeof info.by_domain === "object" ? Object.keys(info.by_domain) : [];
    const field = (id, label, attrs) =>
      h("div", { class: "field" }, h("label", { for: id }, label), h("input", Object.assign({ id, name: id }, attrs)));
    return h(
      "form",
      {
        id: "filters",
        class: "filters",
        "aria-label": "Filter the traces",
        onsubmit: (event) => {
          event.preventDefault();
          const form = new FormData(event.target);
          location.hash = tracesHash({
            sort: state.sort,
            domain: String(form.get("filter-domain")).trim(),
            q: String(form.get("filter-text")).trim(),
            min: String(form.get("filter-min")).trim(),
            max: String(form.get("filter-max")).trim(),
            offset: 0,
          });
        },
      },
      field("filter-domain", "Domain", { value: state.domain, list: "domain-list", autocomplete: "off" }),
      h("datalist", { id: "domain-list" }, domains.map((name) => h("option", { value: name }))),
      field("filter-text", "Text in id or objective", { value: state.q, type: "search" }),
      field("filter-min", "Value from", { value: state.min, type: "number", min: 0, max: 1, step: "any" }),
      field("filter-max", "Value to", { value: state.max, type: "number", min: 0, max: 1, step: "any" }),
      h(
        "div",
        { class: "buttons" },
        h("button", { type: "submit" }, "Apply filters"),
        h("button", { type: "button", onclick: () => (location.hash = tracesHash({ sort: state.sort })) }, "Clear")
      )
    );
  }

  function tracesTable(items, state, caption) {
    const showAdded = items.some((item) => item.added_at);
    const columns = COLUMNS.filter((column) => !column.optional || showAdded);
    const current = state.sort.replace(/^-/, "");
    const descending = state.sort.startsWith("-");
    const header = columns.map((column) => {
      if (!column.sort) return h("th", { scope: "col" }, column.label);
      const active = column.sort === current;
      const next = active ? (descending ? column.sort : "-" + column.sort) : column.ascendingFirst ? column.sort : "-" + column.sort;
      return h(
        "th",
        { scope: "col", "aria-sort": active ? (descending ? "descending" : "ascending") : "none", class: column.number ? "number" : null },
        h(
          "button",
          {
            type: "button",
            class: "sort",
            "data-sort": column.sort,
            onclick: () => (location.hash = tracesHash(Object.assign({}, state, { sort: next, offset: 0 }))),
          },
          column.label,
          h("span", { class: "arrow", "aria-hidden": "true" }, active ? (descending ? " ▼" : " ▲") : " ↕")
        )
      );
    });
    const rows = items.map((item) =>
      h("tr", { "data-id": item.id }, columns.map((column) => cell(column, item)))
    );
    return h(
      "div",
      { class: "table-wrap" },
      h("table", { id: "traces" }, h("caption", null, caption), h("thead", null, h("tr", null, header)), h("tbody", null, rows))
    );
  }

  function cell(column, item) {
    if (column.key === "id") {
      return h("th", { scope: "row" }, traceLink(item.id), item.objective ? h("span", { class: "objective" }, item.objective) : null);
    }
    if (column.key === "nearest") {
      const nearest = item.nearest;
      if (!nearest || !nearest.id) return h("td", null, nearest ? `(unnamed, ${number(nearest.similarity, 2)})` : "—");
      return h("td", { class: "nearest" }, traceLink(nearest.id), ` (${number(nearest.similarity, 2)})`);
    }
    if (column.key === "success") return h("td", null, yesNo(item.success));
    if (column.number) return h("td", { class: "number" }, number(item[column.key]));
    return h("td", { class: column.key }, item[column.key] === null || item[column.key] === undefined ? "—" : String(item[column.key]));
  }

  function pager(state, total) {
    if (total <= PAGE_SIZE) return null;
    const go = (offset) => () => (location.hash = tracesHash(Object.assign({}, state, { offset })));
    return h(
      "nav",
      { class: "pager", "aria-label": "Pages" },
      h("button", { type: "button", disabled: state.offset === 0, onclick: go(Math.max(0, state.offset - PAGE_SIZE)) }, "Previous page"),
      h("button", { type: "button", disabled: state.offset + PAGE_SIZE >= total, onclick: go(state.offset + PAGE_SIZE) }, "Next page")
    );
  }

  // ---- search --------------------------------------------------------------------------------

  async function searchView(text) {
    document.getElementById("search-text").value = text;
    if (!text.trim()) return { title: "Search", nodes: [h("h1", null, "Search"), h("p", null, "Type words to search for.")] };
    const result = await api("/search", { method: "POST", body: JSON.stringify({ text, k: SEARCH_HITS }) });
    const info = await stats();
    const textual = info.search === "text";
    const rows = result.hits.map((hit) =>
      h(
        "tr",
        null,
        h("th", { scope: "row" }, traceLink(hit.id), hit.objective ? h("span", { class: "objective" }, hit.objective) : null),
        h("td", null, hit.domain || "—"),
        h("td", { class: "number" }, number(hit.value)),
        h("td", { class: "number" }, number(hit.similarity))
      )
    );
    return {
      title: "Search",
      status: `${result.hits.length} results.`,
      nodes: [
        h("h1", null, "Search: ", h("q", null, text)),
        h("p", { class: "note" }, searchNote(info)),
        rows.length
          ? table(`${rows.length} traces`, ["Trace", "Domain", "Value", textual ? "Words matched" : "Similarity"], rows, "hits")
          : h("p", { class: "empty" }, "No trace matches."),
      ],
    };
  }

  function searchNote(info) {
    if (info.search === "text") return "Text search: finds the words in trace ids and objectives (no embedder is loaded).";
    if (info.search === "embedding") return "Search by meaning: traces ranked by embedding similarity.";
    return "";
  }

  // ---- one trace -----------------------------------------------------------------------------

  async function traceView(id) {
    const detail = await api("/traces/" + encodeURIComponent(id));
    const trace = detail.trace;
    const record = detail.record;
    const sources = detail.sources || (detail.source ? { source: detail.source } : {});
    const nodes = [
      h("h1", null, "Trace ", h("code", null, id)),
      trace ? h("p", { class: "objective-line" }, trace.task.objective) : null,
      definitions([
        ["Domain", (record && record.domain) || (trace && trace.metadata.task_domain) || "—"],
        ["Success", yesNo(record ? record.success : trace ? trace.metadata.success : null)],
        detail.added_at ? ["Added", detail.added_at] : null,
        ...Object.entries(sources).map(([kind, place]) => [`Read from (${kind})`, h("code", null, String(place))]),
      ]),
    ];
    const nearest = (record && record.nearest && record.nearest.id) || ((detail.near_duplicates || [])[0] || {}).id;
    nodes.push(
      h(
        "p",
        { class: "compare-links" },
        nearest ? h("a", { href: compareHref(id, nearest), id: "compare-nearest" }, "Compare with nearest") : null,
        nearest ? " · " : null,
        h("a", { href: compareHref(id, ""), id: "compare-other" }, "Compare with another trace")
      )
    );
    if (record) nodes.push(scoreSection(record));
    if (trace) nodes.push(stepsSection(trace));
    else nodes.push(h("p", { class: "note" }, "The steps are not loaded: pass the trace's ReasoningTrace file too."));
    if (detail.eval) nodes.push(rubricSection(detail.eval));
    nodes.push(duplicatesSection(detail.near_duplicates || []));
    return { title: id, nodes };
  }

  function scoreSection(record) {
    const weights = record.weights ? Object.entries(record.weights).map(([name, weight]) => `${name} ${number(weight, 2)}`).join(", ") : null;
    const nearest = record.nearest;
    return h(
      "section",
      { "aria-labelledby": "score-title" },
      h("h2", { id: "score-title" }, "Value score"),
      definitions([
        ["Value", number(record.score)],
        ["Complexity", number(record.complexity)],
        ["Novelty", [number(record.novelty), record.novelty_source ? ` (${record.novelty_source})` : ""]],
        ["Tool diversity", number(record.tool_diversity)],
        ["Outcome", number(record.outcome)],
        ["Nearest trace", nearest && nearest.id ? [traceLink(nearest.id), ` (similarity ${number(nearest.similarity)})`] : "—"],
        ["Profile", record.profile || "—"],
        weights ? ["Weights", weights] : null,
        record.rules && record.rules.length ? ["Rules", record.rules.join(", ")] : null,
        record.threshold !== undefined && record.threshold !== null ? ["Threshold", `${number(record.threshold, 2)} (${record.passed ? "passed" : "not passed"})`] : null,
      ]),
      h("h3", null, "Explanation"),
      h("p", { class: "explanation" }, record.explanation || "No explanation recorded.")
    );
  }

  function stepsSection(trace) {
    const rows = trace.steps.map((step) =>
      h(
        "tr",
        { class: "step step-" + step.type },
        h("td", { class: "number", title: originText(step.origin).replace(/^, /, "") || null }, String(step.step_id)),
        h("td", null, h("span", { class: "badge " + step.type }, step.type.replace("_", " "))),
        h("td", null, step.tool ? h("code", null, step.tool.name + (step.tool.mcp_server ? ` (${step.tool.mcp_server})` : "")) : "—"),
        h("td", { class: "content" }, step.content || step.output_summary || "—"),
        h("td", null, step.input ? h("pre", null, JSON.stringify(step.input, null, 2)) : "—")
      )
    );
    return h(
      "section",
      { "aria-labelledby": "steps-title" },
      h("h2", { id: "steps-title" }, "Steps"),
      table(`${trace.steps.length} steps`, ["Step", "Type", "Tool", "Content", "Input"], rows, "steps"),
      h("h3", null, "Outcome"),
      definitions([
        ["Result", trace.outcome.result_summary || "—"],
        ["Confidence", number(trace.outcome.confidence, 2)],
      ])
    );
  }

  // A criterion is passed (true), failed (false) or undetermined (null: the trace lacked what
  // its check needs); undetermined is left out of the score and is never shown as a failure.
  function verdictOf(passed) {
    if (passed === true) return { kind: "pass", text: "✓ pass" };
    if (passed === false) return { kind: "fail", text: "✗ fail" };
    return { kind: "undetermined", text: "? undetermined" };
  }

  function rubricSection(result) {
    const errors = result.errors || {};
    const undetermined = result.undetermined || {};
    const rows = Object.entries(result.details || {}).map(([criterion, passed]) => {
      const verdict = verdictOf(passed);
      const why = errors[criterion] ? ` — error: ${errors[criterion]}` : undetermined[criterion] ? ` — ${undetermined[criterion]}` : "";
      return h(
        "tr",
        { class: verdict.kind },
        h("th", { scope: "row" }, criterion),
        h("td", { class: "number" }, number((result.weights || {})[criterion], 2)),
        h("td", null, h("span", { class: "verdict" }, verdict.text), why)
      );
    });
    return h(
      "section",
      { "aria-labelledby": "rubric-title" },
      h("h2", { id: "rubric-title" }, "Rubric: ", result.rubric),
      definitions([
        ["Score", number(result.score)],
        ["Outcome", result.outcome_type],
        result.gate_passed !== null && result.gate_passed !== undefined ? ["Success gate", result.gate_passed ? "passed" : "failed"] : null,
        result.first_failing_step !== null && result.first_failing_step !== undefined
          ? ["First failing step", `${result.first_failing_step} (${result.first_failing_criterion || "?"}${result.first_failing_agent ? ", agent " + result.first_failing_agent : ""}${originText(result.first_failing_origin)})`]
          : null,
      ]),
      table("Criteria", ["Criterion", "Weight", "Result"], rows, "criteria"),
      h("p", { class: "explanation" }, result.explanation || "")
    );
  }

  // Where a step came from in the user's file ({"message": 12} → ", from message 12").
  function originText(origin) {
    if (!origin || typeof origin !== "object") return "";
    const parts = Object.entries(origin).map(([key, value]) => `${key.replace(/_/g, " ")} ${value}`);
    return parts.length ? ", from " + parts.join(", ") : "";
  }

  function duplicatesSection(duplicates) {
    return h(
      "section",
      { "aria-labelledby": "dups-title" },
      h("h2", { id: "dups-title" }, "Near-duplicates"),
      duplicates.length
        ? h(
            "ul",
            { class: "near-duplicates" },
            duplicates.map((d) => h("li", null, traceLink(d.id), ` (similarity ${number(d.similarity)})`))
          )
        : h("p", { class: "empty" }, "None known.")
    );
  }

  // ---- two traces compared -------------------------------------------------------------------

  const RELATIONS = {
    same: "=",
    arguments_differ: "~ other arguments",
    result_differs: "! other result",
    different: "# different",
    only_a: "< only A",
    only_b: "> only B",
  };

  function compareHref(a, b) {
    return "#/compare?" + new URLSearchParams({ a, b });
  }

  function verdictText(value) {
    return value === true ? "passed" : value === false ? "failed" : "undetermined";
  }

  function withSteps(reason, steps) {
    // The steps the verdict is about, unless its reason names them itself.
    return steps.length && !reason.includes("step") ? `${reason} (steps ${steps.join(", ")})` : reason;
  }

  async function compareView(a, b) {
    const listing = await api("/traces?limit=200").catch(() => ({ items: [] }));
    const choices = h("datalist", { id: "trace-ids" }, listing.items.map((item) => h("option", { value: item.id })));
    const inputA = h("input", { id: "compare-a", name: "a", value: a, list: "trace-ids", required: true, autocomplete: "off" });
    const inputB = h("input", { id: "compare-b", name: "b", value: b, list: "trace-ids", required: true, autocomplete: "off" });
    const form = h(
      "form",
      {
        id: "compare-form",
        class: "compare-form",
        onsubmit: (event) => {
          event.preventDefault();
          location.hash = compareHref(inputA.value.trim(), inputB.value.trim());
        },
      },
      h("label", { for: "compare-a" }, "Trace A (before)"),
      inputA,
      h("label", { for: "compare-b" }, "Trace B (after)"),
      inputB,
      choices,
      h("button", { type: "submit" }, "Compare")
    );
    const nodes = [
      h("h1", null, "Compare two traces"),
      h("p", null, h("a", { href: "#/runs", id: "compare-runs" }, "Compare two evaluation runs instead")),
      form,
    ];
    if (!a || !b) {
      nodes.push(h("p", { class: "note" }, "Pick two traces: the run before (A) and the run after (B)."));
      return { title: "Compare", nodes };
    }
    const c = await api("/compare?" + new URLSearchParams({ a, b }));
    nodes.push(flippedSection(c));
    const parting = c.parting;
    const call = c.parting_call;
    const stepOf = (value) => (value === null || value === undefined ? "—" : String(value));
    nodes.push(
      definitions([
        ["A", [traceLink(c.a.id), ` — ${c.a.steps} steps, ${c.a.tool_calls} calls, success ${yesNo(c.a.success)}`]],
        ["B", [traceLink(c.b.id), ` — ${c.b.steps} steps, ${c.b.tool_calls} calls, success ${yesNo(c.b.success)}`]],
        ["Identical", c.identical ? "yes: exact copies" : "no"],
        ["Similarity", number(c.similarity, 2) + (c.copy_relation ? ` (${c.copy_relation.replace("_", " ")})` : "")],
        ["Parted at", parting ? `step ${stepOf(parting.step_a)} of A, step ${stepOf(parting.step_b)} of B: ${parting.reason}` : "—"],
        ["First call that differs", call ? `step ${stepOf(call.step_a)} of A, step ${stepOf(call.step_b)} of B: ${call.reason}` : "—"],
      ]),
      c.notes.map((note) => h("p", { class: "note" }, note))
    );
    nodes.push(callsSection(c));
    nodes.push(alignedSection(c));
    return { title: "Compare", nodes, status: c.explanation };
  }

  function flippedSection(c) {
    let body;
    if (c.rubric === null) body = h("p", { class: "empty" }, "No rubric was applied.");
    else if (!c.flipped.length) body = h("p", { class: "empty" }, `No criterion of the ${c.rubric} rubric flipped.`);
    else
      body = table(
        `Criteria of the ${c.rubric} rubric whose verdict flipped`,
        ["Criterion", "Change", "A", "B"],
        c.flipped.map((flip) =>
          h(
            "tr",
            { class: "flip flip-" + flip.direction, "data-criterion": flip.name },
            h("th", { scope: "row" }, flip.name),
            h("td", null, flip.direction),
            h("td", null, `${verdictText(flip.a)}: ${withSteps(flip.reason_a, flip.steps_a)}`),
            h("td", null, `${verdictText(flip.b)}: ${withSteps(flip.reason_b, flip.steps_b)}`)
          )
        ),
        "flipped"
      );
    return h("section", { "aria-labelledby": "flipped-title" }, h("h2", { id: "flipped-title" }, "Flipped criteria"), body);
  }

  function callsSection(c) {
    const items = [];
    for (const [name, calls] of [["A", c.only_a_calls], ["B", c.only_b_calls]])
      for (const call of calls)
        items.push(h("li", null, `Only ${name}, step ${call.step}: `, h("code", null, `${call.tool}(${JSON.stringify(call.arguments)})`)));
    for (const change of c.argument_changes)
      items.push(
        h(
          "li",
          null,
          `Step ${change.step_a} of A, ${change.step_b} of B: `,
          h("code", null, change.tool),
          " — ",
          change.fields
            .map((f) => (f.only_in ? `${f.path}: ${JSON.stringify(f.only_in === "a" ? f.a : f.b)} (only ${f.only_in.toUpperCase()})` : `${f.path}: ${JSON.stringify(f.a)} → ${JSON.stringify(f.b)}`))
            .join("; ")
        )
      );
    return h(
      "section",
      { "aria-labelledby": "calls-title" },
      h("h2", { id: "calls-title" }, "Calls"),
      items.length ? h("ul", { class: "calls" }, items) : h("p", { class: "empty" }, "The same calls with the same arguments.")
    );
  }

  function alignedSection(c) {
    const partingRow = c.parting ? c.parting.row : -1;
    const cells = (ref) =>
      ref
        ? [h("td", { class: "number" }, String(ref.step)), h("td", { class: "content" }, ref.label)]
        : [h("td", { class: "number" }, ""), h("td", { class: "content empty" }, "")];
    const rows = c.rows.map((row, index) =>
      h(
        "tr",
        {
          class: "aligned-" + row.relation + (index === partingRow ? " parting" : ""),
          id: index === partingRow ? "parting-row" : null,
          "data-relation": row.relation,
          "aria-current": index === partingRow ? "step" : null,
        },
        h("td", null, (index === partingRow ? "parted here · " : "") + RELATIONS[row.relation]),
        cells(row.a),
        cells(row.b)
      )
    );
    return h(
      "section",
      { "aria-labelledby": "aligned-title" },
      h("h2", { id: "aligned-title" }, "Side by side"),
      table(`${c.rows.length} aligned rows, ${c.same_steps} the same`, ["", "A step", "A", "B step", "B"], rows, "aligned")
    );
  }

  // ---- two evaluation runs compared -----------------------------------------------------------

  function runsHref(a, b, by) {
    return "#/runs?" + new URLSearchParams({ a, b, by });
  }

  function caseLinks(keys, by) {
    if (!keys.length) return "0";
    const shown = keys.slice(0, 20).map((key) => (by === "id" ? traceLink(key) : h("code", null, key)));
    const list = shown.flatMap((node, index) => (index ? [", ", node] : [node]));
    return [`${keys.length}: `, list, keys.length > 20 ? ` … (${keys.length - 20} more)` : ""];
  }

  async function runsView(a, b, by) {
    const info = await stats();
    const files = info.files || [];
    const select = (id, value) =>
      h("select", { id, name: id, required: true }, h("option", { value: "" }, "—"), files.map((file) => h("option", { value: file, selected: file === value }, file)));
    const selectA = select("runs-a", a);
    const selectB = select("runs-b", b);
    const selectBy = h("select", { id: "runs-by" }, ["id", "task"].map((v) => h("option", { value: v, selected: v === by }, v)));
    const form = h(
      "form",
      {
        id: "runs-form",
        class: "compare-form",
        onsubmit: (event) => {
          event.preventDefault();
          location.hash = runsHref(selectA.value, selectB.value, selectBy.value);
        },
      },
      h("label", { for: "runs-a" }, "Run A (before)"),
      selectA,
      h("label", { for: "runs-b" }, "Run B (after)"),
      selectB,
      h("label", { for: "runs-by" }, "Pair cases by"),
      selectBy,
      h("button", { type: "submit" }, "Compare runs")
    );
    const nodes = [h("h1", null, "Compare two evaluation runs"), form];
    if (!a || !b) {
      nodes.push(h("p", { class: "note" }, "Pick two files of kp eval lines: the run before (A) and the run after (B)."));
      return { title: "Compare runs", nodes };
    }
    const c = await api("/runs/compare?" + new URLSearchParams({ a, b, by }));
    const rate = (value) => (value === null || value === undefined ? "—" : (100 * value).toFixed(1) + "%");
    const rows = c.criteria.map((k) =>
      h(
        "tr",
        { class: k.dropped ? "fail" : null, "data-criterion": k.name },
        h("th", { scope: "row" }, k.name),
        h("td", { class: "number" }, rate(k.pass_rate_a)),
        h("td", { class: "number" }, rate(k.pass_rate_b) + (k.dropped ? " (dropped)" : "")),
        h("td", null, caseLinks(k.passed_to_failed, c.by)),
        h("td", null, caseLinks(k.failed_to_passed, c.by))
      )
    );
    const s = c.score;
    nodes.push(
      definitions([
        ["Rubric", c.rubric || "—"],
        ["Paired", `${c.paired} cases by ${c.by}; only in A: ${c.only_a.length}, only in B: ${c.only_b.length}`],
        s ? ["Mean score", `${number(s.mean_a, 4)} → ${number(s.mean_b, 4)}: ${s.mean_delta >= 0 ? "+" : ""}${number(s.mean_delta, 4)}, 95% CI ${number(s.low, 4)} to ${number(s.high, 4)} (${s.method})`] : null,
        ["Cases pass → fail", caseLinks(c.cases_regressed, c.by)],
        ["Cases fail → pass", caseLinks(c.cases_improved, c.by)],
      ]),
      h(
        "section",
        { "aria-labelledby": "runs-criteria-title" },
        h("h2", { id: "runs-criteria-title" }, "Criteria"),
        table("Pass rate per criterion over the paired cases", ["Criterion", "Before", "After", "Pass → fail", "Fail → pass"], rows, "run-criteria")
      ),
      h(
        "section",
        { "aria-labelledby": "runs-outcomes-title" },
        h("h2", { id: "runs-outcomes-title" }, "Outcome changes"),
        c.outcome_changes.length
          ? h("ul", null, c.outcome_changes.map((o) => h("li", null, `${o.before || "none"} → ${o.after || "none"}: `, caseLinks(o.cases, c.by))))
          : h("p", { class: "empty" }, "None.")
      ),
      h("section", { "aria-labelledby": "runs-verdict-title" }, h("h2", { id: "runs-verdict-title" }, "Regressions"),
        c.regressions.length ? h("ul", { class: "regressions" }, c.regressions.map((r) => h("li", null, r))) : h("p", { class: "empty" }, "No regression."))
    );
    return { title: "Compare runs", nodes, status: c.explanation };
  }

  // ---- groups ----------------------------------------------------------------------------------

  async function groupsView() {
    // kp serve keeps no groups (a near-duplicate is rejected when contributed): no /v1/groups.
    const result = await api("/groups").catch((error) => {
      if (error.status === 404) return null;
      throw error;
    });
    if (result === null) {
      return {
        title: "Groups",
        status: "This server keeps no groups.",
        nodes: [
          h("h1", null, "Groups of near-duplicates"),
          h(
            "p",
            { class: "empty" },
            "This server keeps no groups: a knowledge base rejects a near-duplicate when it is contributed. kp curate --groups writes groups of a set of traces, and kp view shows them."
          ),
        ],
      };
    }
    const groups = result.groups || [];
    const sections = groups.map((group, index) =>
      h(
        "section",
        { class: "group", "aria-labelledby": `group-${index}` },
        h("h2", { id: `group-${index}` }, "Kept ", traceLink(group.kept)),
        h("p", { class: "reason" }, group.reason),
        group.duplicates.length
          ? table(
              `${group.duplicates.length} dropped as near-duplicates`,
              ["Duplicate", "Similarity", "Value"],
              group.duplicates.map((d) =>
                h("tr", null, h("th", { scope: "row" }, traceLink(d.id)), h("td", { class: "number" }, number(d.similarity)), h("td", { class: "number" }, number(d.value)))
              ),
              "duplicates"
            )
          : null
      )
    );
    return {
      title: "Groups",
      status: `${groups.length} groups.`,
      nodes: [
        h("h1", null, "Groups of near-duplicates"),
        groups.length ? sections : h("p", { class: "empty" }, "No groups: kp curate --groups writes them."),
      ],
    };
  }

  // ---- start -----------------------------------------------------------------------------------

  document.getElementById("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = document.getElementById("search-text").value.trim();
    if (text) location.hash = "#/search?" + new URLSearchParams({ text });
  });
  window.addEventListener("hashchange", render);
  document.getElementById("forget-key").addEventListener("click", forgetKey);
  showForgetKey();
  stats().then((info) => {
    document.getElementById("search-note").textContent = searchNote(info);
    // Only a server with groups (kp view) counts them; elsewhere the link would lead nowhere.
    document.getElementById("nav-groups-item").hidden = !info || typeof info.groups !== "number";
  });
  render();
})();
