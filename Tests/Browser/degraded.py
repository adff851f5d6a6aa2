"""The dashboard's header on a cluster node that lost Redis, in a real browser (Debian's chromium
and chromium-driver, driven by selenium).

usage: degraded.py HTTP_BASE SCREENSHOT_DIR

The node at HTTP_BASE (127.0.0.1 only) has lost its Redis: the header must say it is degraded,
that it serves pushes and refuses changes. Prints one JSON line: {"ok", "text", "class"}.
"""
import json, os, sys, time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

BASE, SHOTS = sys.argv[1], sys.argv[2]
assert BASE.startswith("http://127.0.0.1:"), "tests talk to 127.0.0.1 only"

options = Options()
options.binary_location = "/usr/bin/chromium"
for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,800",
          "--no-first-run", "--disable-extensions", "--disable-background-networking", "--disable-sync",
          "--disable-component-update", "--metrics-recording-only", "--password-store=basic"]:
    options.add_argument(a)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_page_load_timeout(20)
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
