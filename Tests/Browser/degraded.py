"""The dashboard's header on a cluster node that lost Redis, in a real browser (Debian's chromium
and chromium-driver, driven by selenium).

usage: degraded.py HTTP_BASE SCREENSHOT_DIR

The node at HTTP_BASE (127.0.0.1 only) has lost its Redis: the header must say it is degraded,
that it serves pushes and refuses changes. Prints one JSON line: {"ok", "text", "class"}.
"""
import json, os, sys, time

from browser import chromium
from selenium.webdriver.common.by import By

BASE, SHOTS = sys.argv[1], sys.argv[2]
assert BASE.startswith("http://127.0.0.1:"), "tests talk to 127.0.0.1 only"

driver = chromium()
result = {"ok": False, "text": "", "class": ""}
try:
    driver.get(BASE + "/#/live")
    deadline = time.monotonic() + 15  # the header asks /healthz every 5 s
    while time.monotonic() < deadline:
        el = driver.find_element(By.ID, "status")
        result["text"], result["class"] = el.text, el.get_attribute("class")
        if "degraded" in result["text"]:
            break
        time.sleep(0.2)
    result["ok"] = ("degraded" in result["text"] and "refuses changes" in result["text"]
                    and "Redis" in result["text"] and result["class"] == "bad")
    driver.save_screenshot(os.path.join(SHOTS, "degraded.png"))
finally:
    driver.quit()
print(json.dumps(result))
