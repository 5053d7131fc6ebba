"""Driver of test/e2e/clients-python.test.ts: the retry rule of nsm_client (MODE=jobs|rate|proxy)."""
import json
import os
import time

from nsm_client import NsmClient, NsmError, RetryPolicy

BASE, TOKEN, MODE = os.environ["URL"], os.environ["TOKEN"], os.environ["MODE"]
FIXTURE = os.environ.get("FIXTURE")
retries = []
report = {"mode": MODE}


def on_retry(e):
    retries.append({"method": e.method, "path": e.path, "attempt": e.attempt, "status": e.status, "type": e.error.type,
                    "retryAfter": e.error.retry_after, "delay": e.delay})
    print("retry " + json.dumps(retries[-1]), flush=True)


def caught(fn):
    try:
        return {"ok": fn()}
    except NsmError as e:
        return {"error": {"class": type(e).__name__, "type": e.type, "status": e.status, "retryAfter": e.retry_after}}


t0 = time.monotonic()
if MODE == "jobs":
    # JOBS_MAX_ACTIVE_PER_WORKSPACE=1: a real 429 too_many_jobs on POST /jobs (charged, but a 429 says it was not
    # processed): retried after Retry-After; the first job is canceled at the first retry so the retry goes through.
    state = {}

    def cancel_first(e):
        on_retry(e)
        if "first" in state:
            client.jobs.cancel(state["first"])

    client = NsmClient(BASE, TOKEN, on_retry=cancel_first)
    state["first"] = client.jobs.submit(url=os.environ["STALL_URL"])["id"]
    before = client.jobs.get(state["first"])
    report["firstBefore"] = {"status": before["status"], "error": before["error"]}
    second = caught(lambda: client.jobs.submit(FIXTURE, model="nsm-1"))
    report["second"] = {"status": second["ok"]["status"]} if "ok" in second else second
    report["first"] = client.jobs.get(state["first"])["status"]
    if "ok" in second:
        report["secondFinal"] = client.jobs.wait(second["ok"]["id"], interval=0.25)["status"]
elif MODE == "rate":
    # 1 request a minute: the second call's real 429 rate_limited asks for about a minute; a client that waits at most
    # 5 s raises the typed error at once.
    client = NsmClient(BASE, TOKEN, retry=RetryPolicy(max_retry_after=5), on_retry=on_retry)
    client.models()
    t1 = time.monotonic()
    report["second"] = caught(lambda: client.models())
    report["secondS"] = time.monotonic() - t1
elif MODE == "proxy":
    client = NsmClient(BASE, TOKEN, retry=RetryPolicy(base_delay=0.05), on_retry=on_retry)
    report["bare502Post"] = caught(lambda: client.denoise(FIXTURE, model="nsm-1"))
    models = caught(lambda: client.models())
    report["bare502Get"] = {"default": models["ok"]["default"]} if "ok" in models else models
    env503 = caught(lambda: len(client.denoise(FIXTURE, model="nsm-1")))
    report["envelope503Post"] = env503
    off = NsmClient(BASE, TOKEN, retry=RetryPolicy(max_retries=0), on_retry=on_retry)
    report["retryOff"] = caught(lambda: off.health())
report["retries"] = retries
report["s"] = time.monotonic() - t0
print(json.dumps(report))
