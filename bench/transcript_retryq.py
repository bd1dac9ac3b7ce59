"""Transcript 3 (OpenAI shape): chasing a flaky jest test in a small TypeScript job queue."""

# Tool outputs below are reproduced verbatim (long lines, trailing spaces as pytest prints them).
# ruff: noqa: E501, W291, W293

from __future__ import annotations

from transcript_kit import Session

ROOT = "/workspace/retryq"

FILES = {
    "package.json": """{
  "name": "retryq",
  "version": "0.4.1",
  "type": "module",
  "main": "dist/index.js",
  "scripts": {
    "build": "tsc -p tsconfig.json",
    "typecheck": "tsc -p tsconfig.json --noEmit",
    "lint": "eslint src test --max-warnings 0",
    "test": "jest"
  },
  "devDependencies": {
    "@types/jest": "^29.5.12",
    "eslint": "^8.57.0",
    "jest": "^29.7.0",
    "ts-jest": "^29.1.2",
    "typescript": "^5.4.5"
  }
}
""",
    "tsconfig.json": """{
  "compilerOptions": {
    "target": "ES2022",
    "module": "ES2022",
    "moduleResolution": "bundler",
    "strict": true,
    "noUncheckedIndexedAccess": true,
    "outDir": "dist",
    "declaration": true
  },
  "include": ["src"]
}
""",
    "src/index.ts": """export { retryWithBackoff, type RetryOptions } from "./retry.js";
export { JobQueue, type Job, type JobResult } from "./queue.js";
""",
    "src/retry.ts": """export interface RetryOptions {
  maxAttempts?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  jitter?: boolean;
  shouldRetry?: (error: unknown, attempt: number) => boolean;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function backoffDelay(attempt: number, opts: RetryOptions = {}): number {
  const base = opts.baseDelayMs ?? 100;
  const max = opts.maxDelayMs ?? 10_000;
  const exp = Math.min(max, base * 2 ** (attempt - 1));
  if (opts.jitter === false) {
    return exp;
  }
  // full jitter: uniform in [0, exp * 1.5)
  return Math.floor(Math.random() * exp * 1.5);
}

export async function retryWithBackoff<T>(op: () => Promise<T>, opts: RetryOptions = {}): Promise<T> {
  const maxAttempts = opts.maxAttempts ?? 5;
  let lastError: unknown;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    try {
      return await op();
    } catch (error) {
      lastError = error;
      if (opts.shouldRetry && !opts.shouldRetry(error, attempt)) {
        throw error;
      }
      if (attempt < maxAttempts) {
        await sleep(backoffDelay(attempt, opts));
      }
    }
  }
  throw lastError;
}
""",
    "src/queue.ts": """import { retryWithBackoff, type RetryOptions } from "./retry.js";

export interface Job<T = unknown> {
  id: string;
  run: () => Promise<T>;
  retry?: RetryOptions;
}

export interface JobResult<T = unknown> {
  id: string;
  ok: boolean;
  value?: T;
  error?: unknown;
  durationMs: number;
}

export class JobQueue {
  private readonly pending: Job[] = [];
  private running = 0;

  constructor(private readonly concurrency = 2) {}

  add(job: Job): void {
    this.pending.push(job);
  }

  get size(): number {
    return this.pending.length + this.running;
  }

  async drain(): Promise<JobResult[]> {
    const results: JobResult[] = [];
    const worker = async () => {
      while (this.pending.length > 0) {
        const job = this.pending.shift()!;
        this.running++;
        const started = Date.now();
        try {
          const value = await retryWithBackoff(job.run, job.retry);
          results.push({ id: job.id, ok: true, value, durationMs: Date.now() - started });
        } catch (error) {
          results.push({ id: job.id, ok: false, error, durationMs: Date.now() - started });
        } finally {
          this.running--;
        }
      }
    };
    await Promise.all(Array.from({ length: this.concurrency }, worker));
    return results;
  }
}
""",
    "test/retry.test.ts": """import { backoffDelay, retryWithBackoff } from "../src/retry";

describe("backoffDelay", () => {
  it("doubles without jitter", () => {
    expect([1, 2, 3, 4].map((a) => backoffDelay(a, { baseDelayMs: 100, jitter: false }))).toEqual([
      100, 200, 400, 800,
    ]);
  });

  it("caps at maxDelayMs", () => {
    expect(backoffDelay(20, { baseDelayMs: 100, maxDelayMs: 1000, jitter: false })).toBe(1000);
  });
});

describe("retryWithBackoff", () => {
  it("returns the first success", async () => {
    const op = jest.fn().mockRejectedValueOnce(new Error("flaky")).mockResolvedValue("ok");
    await expect(retryWithBackoff(op, { baseDelayMs: 1 })).resolves.toBe("ok");
    expect(op).toHaveBeenCalledTimes(2);
  });

  it("gives up after maxAttempts", async () => {
    const op = jest.fn().mockRejectedValue(new Error("boom"));
    await expect(retryWithBackoff(op, { maxAttempts: 3, baseDelayMs: 1 })).rejects.toThrow("boom");
    expect(op).toHaveBeenCalledTimes(3);
  });

  it("waits between attempts with jitter", async () => {
    const op = jest.fn().mockRejectedValueOnce(new Error("1")).mockRejectedValueOnce(new Error("2"))
      .mockResolvedValue("done");
    const started = Date.now();
    await expect(retryWithBackoff(op, { baseDelayMs: 1500 })).resolves.toBe("done");
    expect(Date.now() - started).toBeLessThan(4500);
  });

  it("stops when shouldRetry says no", async () => {
    const op = jest.fn().mockRejectedValue(new Error("fatal"));
    await expect(retryWithBackoff(op, { shouldRetry: () => false })).rejects.toThrow("fatal");
    expect(op).toHaveBeenCalledTimes(1);
  });
});
""",
    "test/queue.test.ts": """import { JobQueue } from "../src/queue";

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("JobQueue", () => {
  it("runs every job and reports results", async () => {
    const q = new JobQueue(2);
    q.add({ id: "a", run: async () => 1 });
    q.add({ id: "b", run: async () => { await wait(50); return 2; } });
    q.add({ id: "c", run: async () => 3 });
    const results = await q.drain();
    expect(results.map((r) => r.id).sort()).toEqual(["a", "b", "c"]);
    expect(results.every((r) => r.ok)).toBe(true);
  });

  it("retries failing jobs", async () => {
    const q = new JobQueue(1);
    let calls = 0;
    q.add({ id: "x", run: async () => { calls++; if (calls < 3) throw new Error("nope"); return "ok"; },
            retry: { baseDelayMs: 200 } });
    const [result] = await q.drain();
    expect(result?.ok).toBe(true);
    expect(calls).toBe(3);
  });
});
""",
    ".github/workflows/ci.yml": """name: ci
on: [push, pull_request]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-node@v4
        with:
          node-version: 20
          cache: npm
      - run: npm ci
      - run: npm run lint
      - run: npm run typecheck
      - run: npm test -- --ci
""",
}


def _ci_log() -> str:
    lines = [
        "2026-11-20T09:14:02.1184211Z ##[group]Run npm test -- --ci",
        "2026-11-20T09:14:02.1185034Z npm test -- --ci",
        "2026-11-20T09:14:02.1242890Z shell: /usr/bin/bash -e {0}",
        "2026-11-20T09:14:02.1243312Z ##[endgroup]",
        "2026-11-20T09:14:02.4410021Z ",
        "2026-11-20T09:14:02.4411107Z > retryq@0.4.1 test",
        "2026-11-20T09:14:02.4411472Z > jest --ci",
        "2026-11-20T09:14:02.4411690Z ",
        "2026-11-20T09:14:05.0032154Z PASS test/queue.test.ts",
        "2026-11-20T09:14:10.8810457Z FAIL test/retry.test.ts (6.37 s)",
        "2026-11-20T09:14:10.8812231Z   backoffDelay",
        "2026-11-20T09:14:10.8812809Z     ✓ doubles without jitter (2 ms)",
        "2026-11-20T09:14:10.8813120Z     ✓ caps at maxDelayMs",
        "2026-11-20T09:14:10.8813401Z   retryWithBackoff",
        "2026-11-20T09:14:10.8813686Z     ✓ returns the first success (4 ms)",
        "2026-11-20T09:14:10.8813987Z     ✓ gives up after maxAttempts (6 ms)",
        "2026-11-20T09:14:10.8814322Z     ✕ waits between attempts with jitter (5003 ms)",
        "2026-11-20T09:14:10.8814615Z     ✓ stops when shouldRetry says no (1 ms)",
        "2026-11-20T09:14:10.8815001Z ",
        "2026-11-20T09:14:10.8815398Z   ● retryWithBackoff › waits between attempts with jitter",
        "2026-11-20T09:14:10.8815621Z ",
        '2026-11-20T09:14:10.8816012Z     thrown: "Exceeded timeout of 5000 ms for a test.',
        "2026-11-20T09:14:10.8816430Z     Add a timeout value to this test to increase the timeout, if this is a long-running test. "
        'See https://jestjs.io/docs/api#testname-fn-timeout."',
        "2026-11-20T09:14:10.8816711Z ",
        "2026-11-20T09:14:10.8817044Z       26 |   });",
        "2026-11-20T09:14:10.8817300Z       27 |",
        '2026-11-20T09:14:10.8817622Z     > 28 |   it("waits between attempts with jitter", async () => {',
        "2026-11-20T09:14:10.8817901Z          |   ^",
        '2026-11-20T09:14:10.8818213Z       29 |     const op = jest.fn().mockRejectedValueOnce(new Error("1")).mockRejectedValueOnce(new Error("2"))',
        '2026-11-20T09:14:10.8818534Z       30 |       .mockResolvedValue("done");',
        "2026-11-20T09:14:10.8818807Z       31 |     const started = Date.now();",
        "2026-11-20T09:14:10.8819021Z ",
        "2026-11-20T09:14:10.8819333Z       at it (test/retry.test.ts:28:3)",
        "2026-11-20T09:14:10.8819612Z       at Object.describe (test/retry.test.ts:15:1)",
        "2026-11-20T09:14:10.8819890Z ",
        "2026-11-20T09:14:10.9021166Z Test Suites: 1 failed, 1 passed, 2 total",
        "2026-11-20T09:14:10.9021554Z Tests:       1 failed, 7 passed, 8 total",
        "2026-11-20T09:14:10.9021832Z Snapshots:   0 total",
        "2026-11-20T09:14:10.9022090Z Time:        8.412 s",
        "2026-11-20T09:14:10.9022351Z Ran all test suites.",
        "2026-11-20T09:14:10.9311872Z ##[error]Process completed with exit code 1.",
    ]
    return "\n".join(lines)


def jest(suites: list[tuple[str, list[tuple[str, bool, int]]]], failures: str = "", seconds: float = 3.1) -> str:
    """A jest run: suites of (test title, passed, ms)."""
    out = ["", "> retryq@0.4.1 test", "> jest " + " ".join(s for s, _ in suites if len(suites) == 1), ""]
    failed_suites = 0
    n_pass = n_fail = 0
    for suite, tests in suites:
        ok = all(p for _, p, _ in tests)
        failed_suites += not ok
        out.append(f"{'PASS' if ok else 'FAIL'} {suite}")
        for title, passed, ms in tests:
            n_pass += passed
            n_fail += not passed
            out.append(f"  {'✓' if passed else '✕'} {title}" + (f" ({ms} ms)" if ms else ""))
    if failures:
        out += ["", failures.rstrip("\n")]
    total_suites = len(suites)
    out += [
        "",
        f"Test Suites: {f'{failed_suites} failed, ' if failed_suites else ''}{total_suites - failed_suites} passed, "
        f"{total_suites} total",
        f"Tests:       {f'{n_fail} failed, ' if n_fail else ''}{n_pass} passed, {n_pass + n_fail} total",
        "Snapshots:   0 total",
        f"Time:        {seconds:.3f} s",
        "Ran all test suites." if len(suites) > 1 else f"Ran all test suites matching /{suites[0][0]}/i.",
    ]
    return "\n".join(out)


RETRY_TESTS = [
    ("backoffDelay › doubles without jitter", True, 2),
    ("backoffDelay › caps at maxDelayMs", True, 0),
    ("retryWithBackoff › returns the first success", True, 4),
    ("retryWithBackoff › gives up after maxAttempts", True, 5),
    ("retryWithBackoff › waits between attempts with jitter", True, 3120),
    ("retryWithBackoff › stops when shouldRetry says no", True, 1),
]
QUEUE_TESTS = [
    ("JobQueue › runs every job and reports results", True, 54),
    ("JobQueue › retries failing jobs", True, 611),
]

_LOOP = (
    'for i in $(seq 1 20); do npx jest test/retry.test.ts --silent >/dev/null 2>&1 || echo "run $i failed"; done; '
    "echo done"
)
_TSC = "npx tsc -p tsconfig.json --noEmit"
_JEST_RETRY = "npx jest test/retry.test.ts"

_OLD_JITTER_TEST = """    const started = Date.now();
    await expect(retryWithBackoff(op, { baseDelayMs: 1500 })).resolves.toBe("done");
    expect(Date.now() - started).toBeLessThan(4500);"""
_NEW_JITTER_TEST = """    const delays: number[] = [];
    const sleep = async (ms) => {
      delays.push(ms);
    };
    await expect(retryWithBackoff(op, { baseDelayMs: 1500, sleep, random: () => 0.5 })).resolves.toBe("done");
    expect(delays).toEqual([1125, 2250]);"""

_TS_JEST_DIAG = """  ● Test suite failed to run

    test/retry.test.ts:33:26 - error TS7006: Parameter 'ms' implicitly has an 'any' type.

    33     const sleep = async (ms) => {
                                ~~"""


def _fast(tests: list[tuple[str, bool, int]]) -> list[tuple[str, bool, int]]:
    return [(t, p, 1 if "waits between" in t else ms) for t, p, ms in tests]


def _diagnose_turn(s: Session) -> None:
    s.user(
        "CI keeps failing on test/retry.test.ts, maybe 1 run in 5, always 'waits between attempts with jitter' "
        "timing out. It passes on my machine. Can you make it deterministic?"
    )
    s.do(None, s.read("test/retry.test.ts"))
    s.do(None, s.read("src/retry.ts"))
    s.do(None, s.run(_JEST_RETRY, jest([("test/retry.test.ts", RETRY_TESTS)], seconds=3.914), 0))
    s.do(
        "Passes here. Once more to see the timing spread.",
        s.run(_JEST_RETRY, jest([("test/retry.test.ts", RETRY_TESTS)], seconds=3.914), 0),
    )
    s.do(
        "Running it 20 times in a loop to reproduce the failure.",
        s.run(_LOOP, "run 4 failed\nrun 11 failed\nrun 17 failed\ndone", 0),
    )
    s.do(None, s.grep(r"Math\.random|setTimeout", "src"))
    s.say(
        "Reproduced: 3 failures in 20 runs. The cause is the test itself, not the retry logic. With "
        "`baseDelayMs: 1500` and full jitter, the two waits are uniform in [0, 2250) and [0, 4500) ms with real "
        "timers, so their sum exceeds both the 4500 ms assertion and jest's 5000 ms timeout in a fair share of "
        "runs. I'll make time and randomness injectable (`sleep` and `random` options) so the test can check the "
        "exact delays without waiting."
    )
    s.do(
        None,
        s.edit(
            "src/retry.ts",
            "  shouldRetry?: (error: unknown, attempt: number) => boolean;\n}",
            "  shouldRetry?: (error: unknown, attempt: number) => boolean;\n"
            "  /** Wait function; tests pass a fake one. Default: setTimeout. */\n"
            "  sleep?: (ms: number) => Promise<void>;\n"
            "  /** Random source in [0, 1); default Math.random. */\n  random?: () => number;\n}",
        ),
    )
    s.do(
        None,
        s.edit(
            "src/retry.ts",
            "  return Math.floor(Math.random() * exp * 1.5);",
            "  const random = opts.random;\n  return Math.floor(random() * exp * 1.5);",
        ),
    )
    s.do(
        None,
        s.edit(
            "src/retry.ts",
            "        await sleep(backoffDelay(attempt, opts));",
            "        await (opts.sleep ?? sleep)(backoffDelay(attempt, opts));",
        ),
    )
    s.do(
        None,
        s.run(
            _TSC,
            "src/retry.ts(24,22): error TS2722: Cannot invoke an object which is possibly "
            "'undefined'.\n\n24   return Math.floor(random() * exp * 1.5);\n                        "
            "~~~~~~\n\n\nFound 1 error in src/retry.ts:24\n",
            2,
        ),
    )
    s.do(None, s.read("src/retry.ts"))
    s.do(
        None,
        s.edit("src/retry.ts", "  const random = opts.random;\n", "  const random = opts.random ?? Math.random;\n"),
    )
    s.do(None, s.run(_TSC, "", 0))
    s.do(None, s.edit("test/retry.test.ts", _OLD_JITTER_TEST, _NEW_JITTER_TEST))

    s.do(
        None,
        s.run(
            _JEST_RETRY,
            jest([("test/retry.test.ts", [])], _TS_JEST_DIAG, 1.204)
            .replace("Tests:       0 passed, 0 total", "Tests:       0 total")
            .replace("PASS test/retry.test.ts", "FAIL test/retry.test.ts")
            .replace("Test Suites: 1 passed", "Test Suites: 1 failed"),
            1,
        ),
    )

    s.do(
        None,
        s.edit("test/retry.test.ts", "    const sleep = async (ms) => {", "    const sleep = async (ms: number) => {"),
    )
    s.do(None, s.run(_JEST_RETRY, jest([("test/retry.test.ts", _fast(RETRY_TESTS))], seconds=0.812), 0))
    s.do(None, s.run(_LOOP, "done", 0))
    s.say(
        "Fixed. `RetryOptions` has two new optional fields, `sleep` and `random` (defaults: `setTimeout` and "
        "`Math.random`, so callers see no change). The jitter test now injects both and asserts the exact delays "
        "`[1125, 2250]` instead of measuring wall-clock time: it runs in 1 ms instead of ~3 s and passed 20/20 "
        "runs in the loop (before: 3 failures in 20)."
    )


def _log_again(s: Session, first: bool) -> None:
    s.user(_ci_log())
    if first:
        s.do(
            None,
            s.run(
                "git status --short && git log --oneline -3",
                " M src/retry.ts\n M test/retry.test.ts\n4e1d9b0 (HEAD -> main, origin/main) Add shouldRetry "
                "option\n91aa2c7 Queue: report durations\n0c3f5e2 Initial import",
                0,
            ),
        )
        s.say(
            "That log is from the CI run of 4e1d9b0 at 09:14, which is still `origin/main`: my changes to "
            "`src/retry.ts` and `test/retry.test.ts` are only in your working tree, not committed or pushed. "
            "CI will keep showing this failure until they are pushed."
        )
    else:
        s.say(
            "This is the same log as before (the run of 4e1d9b0 at 09:14:02, same timestamps). It predates the "
            "fix; nothing new has been pushed since, so there is no new CI run yet."
        )


def _queue_turn(s: Session) -> None:
    s.user("ah right. ok so queue.test.ts has the same real-sleep pattern, can you check it too?")
    s.do(None, s.read("test/queue.test.ts"))
    s.do(None, s.read("src/queue.ts"))
    s.do(None, s.grep(r"setTimeout|wait\(|baseDelayMs", "test"))
    s.do(None, s.run("npx jest test/queue.test.ts", jest([("test/queue.test.ts", QUEUE_TESTS)], seconds=1.402), 0))
    s.say(
        "`retries failing jobs` really waits for two jittered backoffs of up to 300 and 600 ms (611 ms in this "
        "run, up to ~900 ms). Not at risk of the 5 s timeout, but slow and time-dependent. Passing a no-op "
        "`sleep` through the job's retry options removes the wait; the 50 ms `wait` in the first test is there on "
        "purpose (it checks that a slow job does not block the other worker), so I'll keep it."
    )
    s.do(
        None,
        s.edit(
            "test/queue.test.ts",
            "            retry: { baseDelayMs: 200 } });",
            "            retry: { baseDelayMs: 200, sleep: async () => {} } });",
        ),
    )
    fast_queue = [(t, p, 1 if "retries" in t else ms) for t, p, ms in QUEUE_TESTS]
    s.do(
        None,
        s.run(
            "npx jest",
            jest([("test/queue.test.ts", fast_queue), ("test/retry.test.ts", _fast(RETRY_TESTS))], seconds=1.377),
            0,
        ),
    )
    lint_fail = (
        "\n> retryq@0.4.1 lint\n> eslint src test --max-warnings 0\n\n/workspace/retryq/test/queue.test.ts\n"
        "  20:45  error  Unexpected empty async arrow function  @typescript-eslint/no-empty-function\n\n"
        "✖ 1 problem (1 error, 0 warnings)\n"
    )
    s.do(None, s.run("npm run lint", lint_fail, 1))
    s.do(
        None,
        s.edit(
            "test/queue.test.ts",
            "            retry: { baseDelayMs: 200, sleep: async () => {} } });",
            "            retry: { baseDelayMs: 200, sleep: () => Promise.resolve() } });",
        ),
    )
    s.do(None, s.run("npm run lint", "\n> retryq@0.4.1 lint\n> eslint src test --max-warnings 0\n", 0))
    s.do(
        None,
        s.run(
            "npx jest",
            jest([("test/queue.test.ts", fast_queue), ("test/retry.test.ts", _fast(RETRY_TESTS))], seconds=1.377),
            0,
        ),
    )
    s.say(
        "Done: the queue retry test now injects an immediate `sleep`, so it no longer waits ~0.6 s. "
        "All 8 tests pass in 1.4 s and lint is clean."
    )


def _ship_turn(s: Session) -> None:
    s.user("ok run everything one last time: lint, typecheck, tests, then commit and push")
    s.do(None, s.run("npm run lint", "\n> retryq@0.4.1 lint\n> eslint src test --max-warnings 0\n", 0))
    s.do(None, s.run("npm run typecheck", "\n> retryq@0.4.1 typecheck\n> tsc -p tsconfig.json --noEmit\n", 0))
    fast_queue = [(t, p, 1 if "retries" in t else ms) for t, p, ms in QUEUE_TESTS]
    s.do(
        None,
        s.run(
            "npx jest",
            jest([("test/queue.test.ts", fast_queue), ("test/retry.test.ts", _fast(RETRY_TESTS))], seconds=1.377),
            0,
        ),
    )
    commit = 'git add -A && git commit -q -m "Make retry timing injectable; deterministic jitter tests" && git push'
    s.do(
        None,
        s.run(
            commit,
            (
                "To github.com:acme/retryq.git\n ! [rejected]        main -> main (fetch first)\n"
                "error: failed to push some refs to 'github.com:acme/retryq.git'\n"
                "hint: Updates were rejected because the remote contains work that you do not\n"
                "hint: have locally. This is usually caused by another repository pushing\n"
                "hint: to the same ref. You may want to first integrate the remote changes\n"
                "hint: (e.g., 'git pull ...') before pushing again."
            ),
            1,
        ),
    )
    s.do(
        "Someone pushed in the meantime. Rebasing onto origin/main.",
        s.run(
            "git pull --rebase",
            (
                "remote: Enumerating objects: 7, done.\nremote: Counting objects: 100% (7/7), done.\n"
                "Unpacking objects: 100% (4/4), 1.02 KiB | 1.02 MiB/s, done.\nFrom github.com:acme/retryq\n"
                "   4e1d9b0..b7e02d4  main       -> origin/main\nSuccessfully rebased and updated refs/heads/main."
            ),
            0,
        ),
    )
    s.do(
        None,
        s.run(
            "npx jest",
            jest([("test/queue.test.ts", fast_queue), ("test/retry.test.ts", _fast(RETRY_TESTS))], seconds=1.377),
            0,
        ),
    )
    s.do(None, s.run("git push", "To github.com:acme/retryq.git\n   b7e02d4..e41c8a9  main -> main", 0))
    s.say(
        "Lint, typecheck and all 8 tests pass. Committed and pushed as e41c8a9 (rebased onto b7e02d4, which "
        "someone had pushed meanwhile; tests re-run after the rebase)."
    )
    s.user("can you check that CI goes green?")
    s.do(
        None,
        s.run(
            "gh run watch --exit-status $(gh run list --limit 1 --json databaseId -q '.[0].databaseId')",
            (
                "✓ main ci · 11873409921\nTriggered via push about 1 minute ago\n\nJOBS\n✓ test in 41s (ID 33090553181)\n"
                "  ✓ Set up job\n  ✓ Run actions/checkout@v4\n  ✓ Run actions/setup-node@v4\n  ✓ Run npm ci\n"
                "  ✓ Run npm run lint\n  ✓ Run npm run typecheck\n  ✓ Run npm test -- --ci\n  ✓ Post Run actions/setup-node@v4\n"
                "  ✓ Post Run actions/checkout@v4\n  ✓ Complete job\n\n✓ Run ci (11873409921) completed with 'success'"
            ),
            0,
        ),
    )
    s.say("CI is green for e41c8a9: lint, typecheck and tests passed in 41 s.")


def build() -> Session:
    s = Session("retryq", "openai", ROOT, FILES)
    s.system(
        "You are an autonomous software engineering agent. Workspace: /workspace/retryq (TypeScript, npm, jest). "
        "Tools: read_file, grep, list_dir, edit_file, write_file, run_command. Verify every change by running the "
        "relevant checks. Be concise."
    )
    _diagnose_turn(s)
    _log_again(s, first=True)
    _queue_turn(s)
    _log_again(s, first=False)
    _ship_turn(s)
    return s
