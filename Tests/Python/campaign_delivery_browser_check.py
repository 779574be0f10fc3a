"""Reads what reached the phones on `herald dashboard`'s campaign pages in a real browser
(headless Chromium through selenium).

Usage: campaign_delivery_browser_check.py BASE_URL TOKEN SCREENSHOT_DIR EXPECTED_JSON

EXPECTED_JSON: {"campaigns": [{"name": ..., "days": {"YYYY-MM-DD": {"sent": "4", "accepted": "4",
"delivered": "90.0 %", ...}}, "note": "text the page must say" | null}]}. Logs in, opens
/campaigns, follows each campaign's name to its page, and compares each day's row of the
table #delivery-days with what is expected (only the cells given). Prints "ok: ..." per step;
exits 0 when every step passed, 1 otherwise.
"""

import json
import os
import sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

base, token, shots, expected_json = sys.argv[1:5]
expected = json.loads(expected_json)
os.makedirs(shots, exist_ok=True)
failures = []


def check(name, condition, detail=""):
    print(("ok: " if condition else "FAILED: ") + name + ("" if condition else " " + detail), flush=True)
    if not condition:
        failures.append(name)
    return condition


def shot(browser, name):
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, max(720, min(height + 20, 2400)))
    browser.save_screenshot(os.path.join(shots, name + ".png"))


options = Options()
options.binary_location = "/usr/bin/chromium"
for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,800", "--hide-scrollbars", "--force-device-scale-factor=1"):
    options.add_argument(argument)
browser = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
browser.set_page_load_timeout(30)
try:
    browser.get(base + "/campaigns")
    field = browser.find_element(By.NAME, "token")
    field.send_keys(token)
    field.submit()
    WebDriverWait(browser, 30).until(expected_conditions.staleness_of(field))
    check("logged in, back on /campaigns", browser.current_url.rstrip("/").endswith("/campaigns"), browser.current_url)
    for campaign in expected["campaigns"]:
        name = campaign["name"]
        browser.get(base + "/campaigns")
        links = browser.find_elements(By.LINK_TEXT, name)
        if not check("campaign %s is listed with a link to its page" % name, len(links) == 1, str(len(links))):
            continue
        links[0].click()
        WebDriverWait(browser, 30).until(expected_conditions.presence_of_element_located((By.ID, "delivery")))
        check("%s: its own page" % name, "/campaigns/" in browser.current_url, browser.current_url)
        text = browser.find_element(By.TAG_NAME, "body").text
        check("%s: the days are FCM's (America/Los_Angeles)" % name, "America/Los_Angeles" in text)
        if campaign.get("note"):
            check("%s: says %r" % (name, campaign["note"]), campaign["note"] in text, text[:1500])
        for day, cells in campaign["days"].items():
            rows = browser.find_elements(By.ID, "day-" + day)
            if not check("%s: a row for %s" % (name, day), len(rows) == 1):
                continue
            for cell, value in cells.items():
                found = rows[0].find_elements(By.CSS_SELECTOR, "td." + cell)
                shown = found[0].text if found else None
                check("%s %s: %s is %s" % (name, day, cell, value), shown == value, "shown: %r" % shown)
        shot(browser, "campaign-" + name)
finally:
    browser.quit()

print("all campaign delivery browser checks passed" if not failures else "failed: " + ", ".join(failures))
sys.exit(1 if failures else 0)
