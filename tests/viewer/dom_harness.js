// Runs viewer.js in Node over a minimal DOM, for the viewer's decisions that need no layout
// (which link is offered, what a page says, what is stored), where no Chromium is installed.
// The headless-Chromium tests (test_viewer_browser*.py) are the full check.
//
// node dom_harness.js VIEWER_JS SCENARIO_JSON: SCENARIO is
//   {"responses": {"/v1/stats": [status, body], ...}, "needs_key": "k" | null,
//    "stored_key": "k" | null, "hash": "#/groups", "click": ["forget-key", ...]}
// and it prints {"hidden": {id: bool}, "main": text, "error": text, "stored_key",
//   "dialog_open", "requests": [[path, authorization]]}.
"use strict";

const fs = require("fs");
const vm = require("vm");

class Node {}

class Element extends Node {
  constructor(tag, id) {
    super();
    this.tagName = tag.toUpperCase();
    this.children = [];
    this.parent = null;
    this.attributes = {};
    this.listeners = {};
    this.hidden = false;
    this.className = "";
    this.value = "";
    this.open = false;
    if (id) this.attributes.id = id;
  }
  get id() { return this.attributes.id; }
  get textContent() {
    return this.children.map((c) => (typeof c === "string" ? c : c.textContent)).join("");
  }
  set textContent(text) { this.replaceChildren(String(text)); }
  append(...nodes) {
    for (const node of nodes) {
      if (node instanceof Element) node.parent = this;
      this.children.push(node);
    }
  }
  replaceChildren(...nodes) { this.children = []; this.append(...nodes); }
  insertBefore(node, reference) {
    const at = this.children.indexOf(reference);
    node.parent = this;
    this.children.splice(at === -1 ? this.children.length : at, 0, node);
  }
  remove() {
    if (this.parent) this.parent.children = this.parent.children.filter((c) => c !== this);
  }
  get previousElementSibling() {
    if (!this.parent) return null;
    const before = this.parent.children.slice(0, this.parent.children.indexOf(this));
    return before.reverse().find((c) => c instanceof Element) || null;
  }
  setAttribute(name, value) { this.attributes[name] = String(value); }
  removeAttribute(name) { delete this.attributes[name]; }
  getAttribute(name) { return this.attributes[name] ?? null; }
  addEventListener(type, listener) { (this.listeners[type] ||= []).push(listener); }
  removeEventListener(type, listener) {
    this.listeners[type] = (this.listeners[type] || []).filter((l) => l !== listener);
  }
  dispatch(type) {
    const event = { type, target: this, preventDefault() {} };
    for (const listener of [...(this.listeners[type] || [])]) listener(event);
  }
  querySelector(selector) {
    for (const child of this.children) {
      if (!(child instanceof Element)) continue;
      const matches = selector.startsWith(".")
        ? child.className.split(" ").includes(selector.slice(1))
        : child.tagName === selector.toUpperCase();
      if (matches) return child;
      const deeper = child.querySelector(selector);
      if (deeper) return deeper;
    }
    return null;
  }
  focus() {}
  showModal() { this.open = true; }
  close() { this.open = false; }
}

async function main() {
  const [viewerPath, scenarioText] = process.argv.slice(2);
  const scenario = JSON.parse(scenarioText);
  const ids = [
    "main", "status", "error", "search-form", "search-text", "search-note", "key-dialog",
    "key-form", "key-input", "nav-traces", "nav-groups", "nav-groups-item", "forget-key",
  ];
  const byId = Object.fromEntries(ids.map((id) => [id, new Element("div", id)]));
  byId["key-form"].append(byId["key-input"]);
  byId["key-dialog"].append(byId["key-form"]);
  byId["error"].hidden = true;
  const storage = new Map(scenario.stored_key ? [["knowledgepulse.apiKey", scenario.stored_key]] : []);
  const requests = [];
  const windowListeners = {};
  const context = {
    Node,
    URLSearchParams,
    console,
    Promise,
    document: {
      title: "",
      getElementById: (id) => byId[id] || null,
      createElement: (tag) => new Element(tag),
    },
    location: { hash: scenario.hash || "" },
    window: {
      localStorage: {
        getItem: (k) => (storage.has(k) ? storage.get(k) : null),
        setItem: (k, v) => storage.set(k, String(v)),
        removeItem: (k) => storage.delete(k),
      },
      addEventListener: (type, listener) => (windowListeners[type] ||= []).push(listener),
    },
    fetch: async (url, options) => {
      const path = url.split("?")[0];
      const auth = (options && options.headers && options.headers.Authorization) || null;
      requests.push([path, auth]);
      let [status, body] = scenario.responses[path] || [404, { detail: "Not Found" }];
      if (scenario.needs_key && auth !== "Bearer " + scenario.needs_key) {
        [status, body] = [401, { detail: "an API key is needed" }];
      }
      return {
        status,
        ok: status >= 200 && status < 300,
        statusText: String(status),
        json: async () => body,
      };
    },
  };
  vm.createContext(context);
  vm.runInContext(fs.readFileSync(viewerPath, "utf8"), context);
  const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
  await settle();
  for (const id of scenario.click || []) {
    byId[id].dispatch("click");
    await settle();
  }
  const hidden = Object.fromEntries(ids.map((id) => [id, byId[id].hidden]));
  process.stdout.write(
    JSON.stringify({
      hidden,
      main: byId.main.textContent,
      error: byId.error.textContent,
      stored_key: storage.get("knowledgepulse.apiKey") ?? null,
      dialog_open: byId["key-dialog"].open,
      requests,
    })
  );
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack ? error.stack : error));
  process.exit(1);
});
