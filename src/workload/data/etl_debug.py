#!/usr/bin/env python3
"""Nightly sales ETL: CSV export -> validated rows -> EUR amounts -> regional summary -> SQLite.

Usage: etl.py SALES.csv RATES.csv OUT.sqlite

The input CSV has the columns
    order_id,order_date,region,customer,currency,amount,quantity
and RATES.csv maps a currency code to how many euros one unit is worth:
    currency,eur_per_unit
"""

import csv
import logging
import sqlite3
import sys
from datetime import datetime

log = logging.getLogger("sales_etl")

SCHEMA = {
    "order_id": {"type": int, "required": True, "min": 1},
    "order_date": {"type": "date", "required": True},
    "region": {"type": str, "required": True},
    "customer": {"type": str, "required": True},
    "currency": {"type": str, "required": True, "choices": {"EUR", "USD", "GBP", "SEK"}},
    "amount": {"type": float, "required": True, "min": 0.0},
    "quantity": {"type": int, "required": True, "min": 1},
}

REGION_ALIASES = {
    "emea": "Europe",
    "europe": "Europe",
    "eu": "Europe",
    "na": "North America",
    "north america": "North America",
    "apac": "Asia Pacific",
    "asia pacific": "Asia Pacific",
}

MAX_REJECT_RATIO = 0.05
DATE_FORMAT = "%Y-%d-%m"


class ValidationError(Exception):
    """A row that does not match SCHEMA."""


# ---------------------------------------------------------------- extract

def extract(path):
    """Read the sales CSV into a list of dicts, one per data row."""
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        for line_no, row in enumerate(reader, start=1):
            if line_no == 1:
                # skip the header line
                continue
            row["_line"] = line_no + 1
            rows.append(row)
    log.info("extracted %d rows from %s", len(rows), path)
    return rows


def load_rates(path):
    """Read currency -> euros per unit."""
    rates = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            rates[row["currency"].strip().upper()] = float(row["eur_per_unit"])
    if "EUR" not in rates:
        rates["EUR"] = 1.0
    return rates


# ---------------------------------------------------------------- validate

def parse_field(name, raw, spec):
    """Convert one raw CSV value according to its schema entry."""
    raw = (raw or "").strip()
    if not raw:
        if spec.get("required"):
            raise ValidationError(f"{name} is missing")
        return None
    kind = spec["type"]
    try:
        if kind == "date":
            value = datetime.strptime(raw, DATE_FORMAT).date()
        else:
            value = kind(raw)
    except ValueError as exc:
        raise ValidationError(f"{name}={raw!r}: {exc}") from exc
    if "min" in spec and value <= spec["min"]:
        raise ValidationError(f"{name}={value} is below the minimum {spec['min']}")
    if "choices" in spec and value not in spec["choices"]:
        raise ValidationError(f"{name}={value!r} is not one of {sorted(spec['choices'])}")
    return value


def validate(rows):
    """Split rows into (valid, rejected); rejected rows carry the reason."""
    valid, rejected = [], []
    for row in rows:
        try:
            clean = {name: parse_field(name, row.get(name), spec) for name, spec in SCHEMA.items()}
        except ValidationError as exc:
            rejected.append({"line": row["_line"], "reason": str(exc)})
            continue
        clean["_line"] = row["_line"]
        valid.append(clean)
    return valid, rejected


# ---------------------------------------------------------------- transform

def normalize_region(name):
    key = name.strip().lower()
    return REGION_ALIASES.get(key, name.strip().title())


def deduplicate(rows, seen=set()):
    """Drop repeated order ids, keeping the first occurrence."""
    unique = []
    for row in rows:
        if row["order_id"] in seen:
            log.warning("duplicate order %s on line %s", row["order_id"], row["_line"])
            continue
        seen.add(row["order_id"])
        unique.append(row)
    return unique


def transform(rows, rates):
    """Normalise regions and convert every amount to euros."""
    out = []
    for row in deduplicate(rows):
        rate = rates.get(row["currency"])
        if rate is None:
            raise KeyError(f"no exchange rate for {row['currency']} (line {row['_line']})")
        out.append({
            "order_id": row["order_id"],
            "order_date": row["order_date"].isoformat(),
            "month": row["order_date"].strftime("%Y-%m"),
            "region": normalize_region(row["region"]),
            "customer": row["customer"].strip(),
            "quantity": row["quantity"],
            "amount_eur": round(row["amount"] / rate, 2),
        })
    return out


# ---------------------------------------------------------------- aggregate

def aggregate(rows):
    """Per (region, month): order count, units, revenue and average order value."""
    summary = {}
    count = 0
    for row in rows:
        key = (row["region"], row["month"])
        stats = summary.setdefault(key, {"orders": 0, "units": 0, "revenue": 0.0})
        stats["orders"] += 1
        stats["units"] += row["quantity"]
        stats["revenue"] += row["amount_eur"]
        count += 1
    for stats in summary.values():
        stats["avg_order"] = round(stats["revenue"] / count, 2)
        stats["revenue"] = round(stats["revenue"], 2)
    return summary


# ---------------------------------------------------------------- load

def load(db_path, rows, summary):
    """Write the cleaned orders and the summary table."""
    conn = sqlite3.connect(db_path)
    cur = conn.cursor()
    cur.execute("""CREATE TABLE IF NOT EXISTS orders (
        order_id INTEGER PRIMARY KEY, order_date TEXT, month TEXT, region TEXT,
        customer TEXT, quantity INTEGER, amount_eur REAL)""")
    cur.execute("""CREATE TABLE IF NOT EXISTS region_month (
        region TEXT, month TEXT, orders INTEGER, units INTEGER, revenue REAL,
        avg_order REAL, PRIMARY KEY (region, month))""")
    for r in rows:
        cur.execute(
            f"INSERT OR REPLACE INTO orders VALUES ({r['order_id']}, '{r['order_date']}', "
            f"'{r['month']}', '{r['region']}', '{r['customer']}', {r['quantity']}, {r['amount_eur']})"
        )
    for (region, month), s in summary.items():
        cur.execute(
            "INSERT OR REPLACE INTO region_month VALUES (?, ?, ?, ?, ?, ?)",
            (region, month, s["orders"], s["units"], s["revenue"], s["avg_order"]),
        )
    conn.close()
    log.info("loaded %d orders and %d summary rows into %s", len(rows), len(summary), db_path)


# ---------------------------------------------------------------- main

def run(sales_path, rates_path, db_path):
    raw = extract(sales_path)
    valid, rejected = validate(raw)
    for rej in rejected:
        log.warning("line %s rejected: %s", rej["line"], rej["reason"])
    ratio = len(rejected) / max(len(raw), 1)
    if ratio > MAX_REJECT_RATIO * 100:
        log.error("%.1f%% of rows rejected; refusing to load", ratio * 100)
        return 1
    rows = transform(valid, load_rates(rates_path))
    summary = aggregate(rows)
    load(db_path, rows, summary)
    return 0


def main(argv):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    return run(argv[1], argv[2], argv[3])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
