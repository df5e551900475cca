// The run page in a real browser at phone size (390 x 844), driven over DevTools: a finished
// run's page renders its answer and diff and fits the screen; a working run's timeline updates
// without a reload; the owner, signed in, cancels a run and sends a follow-up, which no one
// else can (a stranger sees no button, and a forged post is refused). Prints one JSON line with what it saw; the Rust test checks the rest.
import puppeteer from "puppeteer-core";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const [ws, base, doneLink, doneId, liveLink, cancelLink, cancelId, hostileLink, passphrase] = [
  "WS", "BASE", "DONE_LINK", "DONE_ID", "LIVE_LINK", "CANCEL_LINK", "CANCEL_ID", "HOSTILE_LINK",
  "PASSPHRASE",
].map(env);

const check = (ok, what) => {
  if (!ok) throw new Error(what);
};
const phone = { width: 390, height: 844, deviceScaleFactor: 2, isMobile: true, hasTouch: true };
const out = {};
const browser = await puppeteer.connect({ browserWSEndpoint: ws });
try {
  const page = await browser.newPage();
  await page.setViewport(phone);

  // A finished run: answer, diff, pull request, landmarks, nothing wider than the phone.
  await page.goto(doneLink, { waitUntil: "domcontentloaded" });
  out.done = await page.evaluate(() => ({
    badge: document.querySelector(".badge")?.textContent.trim(),
    pr: document.querySelector("a.pr")?.getAttribute("href"),
    answer: document.querySelector(".markdown")?.textContent.trim(),
    files: [...document.querySelectorAll("details.file code.path")].map((e) => e.textContent),
    added: [...document.querySelectorAll("pre.diff .a")].map((e) => e.textContent.trim()),
    removed: [...document.querySelectorAll("pre.diff .d")].map((e) => e.textContent.trim()),
    landmarks: ["header", "main", "nav"].filter((t) => document.querySelector(t)),
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    cancel: !!document.querySelector("form[action$='/cancel']"),
    signIn: [...document.querySelectorAll("a.button")].some((a) => a.textContent.includes("Sign in")),
    steps: [...document.querySelectorAll(".steps li")].map((e) => e.textContent.trim()),
  }));

  // An answer written to attack the page stays text: nothing runs, nothing loads.
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));
  await page.goto(hostileLink, { waitUntil: "load" });
  await new Promise((resolve) => setTimeout(resolve, 500));
  out.hostile = await page.evaluate(() => ({
    pwned: window.__pwned ?? null,
    text: document.querySelector(".markdown")?.textContent ?? "",
    hrefs: [...document.querySelectorAll(".markdown a")].map((a) => a.getAttribute("href")),
    scripts: document.querySelectorAll(".markdown script, .markdown img").length,
  }));
  out.hostile.elsewhere = requests.filter((u) => !u.startsWith(base));
  page.removeAllListeners("request");

  // A working run: the timeline gains the agent's first step through the live updates, while
  // the page stays the same document (the marker survives).
  await page.goto(liveLink, { waitUntil: "domcontentloaded" });
  const before = await page.evaluate(() => {
    window.__sameDocument = true;
    return document.getElementById("run-timeline")?.textContent ?? "";
  });
  await page.waitForFunction(
    () => window.__sameDocument && /sh test\.sh/.test(document.getElementById("run-timeline")?.textContent ?? ""),
    { timeout: 60_000 },
  );
  out.live = await page.evaluate((before) => ({
    before,
    after: document.getElementById("run-timeline").textContent,
    updates: Number(document.body.getAttribute("data-updates") || 0),
    sameDocument: window.__sameDocument === true,
  }), before);

  // Cancel: a stranger (no sign-in) gets no button, and a forged POST is refused.
  await page.goto(cancelLink, { waitUntil: "domcontentloaded" });
  out.strangerSeesCancel = await page.$("form[action$='/cancel']") !== null;
  out.strangerPost = await page.evaluate(async (url) => {
    const r = await fetch(url, { method: "POST", body: new URLSearchParams({ token: "forged" }) });
    return r.status;
  }, `${base}/runs/${cancelId}/cancel`);

  // The owner signs in with the passphrase and is sent back to the run, now with the button.
  await page.goto(`${base}/oauth/signin?next=${encodeURIComponent(`/runs/${cancelId}`)}`);
  await page.type("#passphrase", passphrase);
  await Promise.all([page.waitForNavigation(), page.click("form[action='/oauth/signin'] button[type=submit]")]);
  const landed = page.url();
  check(
    landed.endsWith(`/runs/${cancelId}`),
    `signed in, landed on ${landed}: ${await page.evaluate(() => document.body.innerText)}`,
  );
  await Promise.all([page.waitForNavigation(), page.click("form[action$='/cancel'] button")]);
  out.afterCancel = await page.evaluate(() => document.querySelector(".badge")?.textContent.trim());

  // A follow-up from a finished run's page starts a run in its session and opens its page.
  await page.goto(`${base}/runs/${doneId}`, { waitUntil: "domcontentloaded" });
  await page.type("#follow-up", "Now look around again. [scenario:no-change]");
  await Promise.all([page.waitForNavigation(), page.click("form[action$='/follow-up'] button")]);
  out.followUpUrl = page.url();
  await page.close();
} finally {
  await browser.disconnect();
}
console.log(JSON.stringify(out));
