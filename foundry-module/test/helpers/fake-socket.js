/**
 * A fake clock (injected timers, no real sleeps) and a fake WebSocket class whose instances the
 * test drives as the bridge would; `flush` and `until` let promise chains run without clock time.
 */

export class FakeClock {
  constructor() {
    this.now = 0;
    this.timers = new Map();
    this.next = 1;
  }
  setTimeout = (fn, ms) => {
    const id = this.next++;
    this.timers.set(id, { fn, at: this.now + ms });
    return id;
  };
  clearTimeout = (id) => {
    this.timers.delete(id);
  };
  /** Run every timer due within `ms`, in time order. */
  advance(ms) {
    const end = this.now + ms;
    for (;;) {
      const due = [...this.timers.entries()].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.now = due[1].at;
      due[1].fn();
    }
    this.now = end;
  }
  /** @returns {number[]} delays of pending timers from now */
  pending() {
    return [...this.timers.values()].map((t) => t.at - this.now);
  }
}

/** @returns a WebSocket class whose instances are collected in `.instances` */
export function fakeWebSocketClass() {
  class FakeWebSocket {
    static instances = [];
    constructor(url) {
      this.url = url;
      this.readyState = 0;
      this.sent = [];
      this.closed = null;
      FakeWebSocket.instances.push(this);
    }
    send(text) {
      this.sent.push(JSON.parse(text));
    }
    close(code, reason) {
      this.closed = { code, reason };
      this.readyState = 3;
    }
    /** The server accepts the connection. */
    open() {
      this.readyState = 1;
      this.onopen?.({});
    }
    /** The server sends a message. */
    receive(message) {
      this.onmessage?.({ data: JSON.stringify(message) });
    }
    /** The server (or the network) closes the connection. */
    drop(code = 1006, reason = "") {
      this.readyState = 3;
      this.onclose?.({ code, reason });
    }
  }
  return FakeWebSocket;
}

/** Let settled promises run their callbacks (one macrotask turn; no clock time passes). */
export const flush = () => new Promise((resolve) => setImmediate(resolve));

/** `check()`'s first truthy value, flushing between tries (at most 100 turns; no clock time passes). */
export async function until(check, what) {
  for (let turn = 0; turn < 100; turn += 1) {
    const value = check();
    if (value) return value;
    await flush();
  }
  throw new Error(`never happened: ${what}`);
}
