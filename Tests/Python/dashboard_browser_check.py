"""Drives `herald dashboard` in a real browser (headless Chromium through selenium).

Usage: dashboard_browser_check.py BASE_URL TOKEN SCREENSHOT_DIR REASON_TEXT DEVICE_TOKEN

Logs in through /login, finds the dead letter of DEVICE_TOKEN among those whose reason contains
REASON_TEXT, presses its Retry button, follows the new job's page until it says "completed"
(a worker delivers it meanwhile), and keeps a screenshot of every page on the way.
Prints "ok: ..." per step and "retried job N"; exits 0 when every step passed, 1 otherwise.
"""

import os
import re
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

base, token, shots, reason, device = sys.argv[1:6]
os.makedirs(shots, exist_ok=True)
failures = []


def check(name, condition, detail=""):
    print(("ok: " if condition else "FAILED: ") + name + ("" if condition else " " + detail), flush=True)
    if not condition:
        failures.append(name)
    return condition


def shot(browser, name):
    # The whole page, not only the window: resize to the document's height first.
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
    # Not logged in: the dashboard sends the browser to its login page.
    browser.get(base + "/dead-letters?reason=" + reason)
    check("an anonymous visit lands on /login", "/login" in browser.current_url, browser.current_url)
    shot(browser, "login")
    field = browser.find_element(By.NAME, "token")
    check("the login form has one field named token", len(browser.find_elements(By.CSS_SELECTOR, "form[action='/login'] input:not([type=hidden])")) == 1)
    field.send_keys("not-the-token-at-all")
    field.submit()
    WebDriverWait(browser, 30).until(expected_conditions.staleness_of(field))
    check("a wrong token is refused", "not this dashboard" in browser.page_source)
    field = browser.find_element(By.NAME, "token")
    field.send_keys(token)
    field.submit()
    WebDriverWait(browser, 30).until(expected_conditions.staleness_of(field))
    check("the right token leads back to the page asked for", "/dead-letters" in browser.current_url, browser.current_url)
    cookie = browser.get_cookie("herald_session")
    check("the session cookie is HttpOnly and not the token",
          cookie is not None and cookie.get("httpOnly") and token not in cookie.get("value", ""), str(cookie))

    browser.get(base + "/")
    check("the overview shows the queues", browser.find_elements(By.ID, "queues") != [])
    bars = browser.find_elements(By.CSS_SELECTOR, "svg.chart rect")
    check("the overview draws the last hour, minute by minute", len(bars) >= 20, str(len(bars)))
    shot(browser, "overview")

    browser.get(base + "/dead-letters")
    shot(browser, "dead-letters")
    reason_box = browser.find_element(By.NAME, "reason")
    reason_box.send_keys(reason)
    reason_box.submit()
    # The filtered page: wait for it to replace the one the form was on (a busy machine is slow).
    WebDriverWait(browser, 30).until(expected_conditions.staleness_of(reason_box))
    letters = [element for element in browser.find_elements(By.CSS_SELECTOR, ".letter") if device in element.text]
    check("the filter finds the dead letter", len(letters) == 1, browser.page_source[:2000])
    shot(browser, "dead-letters-filtered")
    letters[0].find_element(By.XPATH, ".//button[text()='Retry']").click()
    notice = WebDriverWait(browser, 30).until(expected_conditions.presence_of_element_located((By.ID, "notice"))).text
    check("the page says it was retried", notice.startswith("Retried 1 dead letter"), notice)
    shot(browser, "retried")
    match = re.search(r"job (\d+)", notice)
    job = match.group(1) if match else ""
    print("retried job " + job, flush=True)
    check("the dead letter left the list", all(device not in element.text for element in browser.find_elements(By.CSS_SELECTOR, ".letter")))

    # The worker picks the new job up; its page says so once FCM has answered.
    deadline = time.time() + 90
    state = ""
    while time.time() < deadline:
        browser.get(base + "/jobs/" + job)
        cells = browser.find_elements(By.CSS_SELECTOR, "#job tr td")
        state = cells[0].text if cells else ""
        if state == "completed":
            break
        time.sleep(0.5)
    check("the job page shows it delivered", state == "completed", state)
    shot(browser, "job")

    browser.get(base + "/admin-log")
    check("the admin log shows the retry", "retry" in browser.find_element(By.CSS_SELECTOR, "table.log").text)
    shot(browser, "admin-log")
finally:
    browser.quit()

print("all dashboard browser checks passed" if not failures else "failed: " + ", ".join(failures))
sys.exit(1 if failures else 0)
