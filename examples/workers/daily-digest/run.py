"""Daily digest: a self-contained example of a script worker.

handoff gives it inputs.json (path in HANDOFF_INPUTS), expects files in outputs/
(HANDOFF_OUTPUTS) and an optional result.json matching the manifest's schema. It has no
network (network.allow is empty), so it only uses what it is given.
"""
import datetime
import json
import os

inputs = json.load(open(os.environ["HANDOFF_INPUTS"]))
topic, days, tone = inputs["topic"], int(inputs["days"]), inputs["tone"]
today = datetime.date.today()
items = [
    f"- {today - datetime.timedelta(days=n)}: nothing new about {topic}"
    for n in range(days)
]
greeting = "Good morning!" if tone == "cheerful" else "Digest"
body = f"# {greeting} {topic}, last {days} day(s)\n\n" + "\n".join(items) + "\n"
with open(os.path.join(os.environ["HANDOFF_OUTPUTS"], "digest.md"), "w") as f:
    f.write(body)
print(f"wrote a digest of {len(items)} item(s) about {topic}")
json.dump({"topic": topic, "items": len(items)}, open(os.environ["HANDOFF_RESULT"], "w"))
