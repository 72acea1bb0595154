"""Tool-call parameter schemas for benchmarks/tail_corpus.py: SYNTHESIZED here, in the style
of function-calling benchmarks (BFCL's parameter objects) and MCP servers' `inputSchema`s
(filesystem, git, fetch, calendar, issue trackers, shops). Not copied from any of them.

They repeat pieces the way real tool sets do (the same `date-time` string, address object,
money amount and pagination fields in many tools), which is what sharing compiled pieces
per vocabulary across schemas is meant to pay off on.
"""
from __future__ import annotations

DATE_TIME = {"type": "string", "format": "date-time", "description": "RFC 3339 timestamp"}
DATE = {"type": "string", "format": "date"}
EMAIL = {"type": "string", "format": "email"}
URI = {"type": "string", "format": "uri"}
UUID = {"type": "string", "format": "uuid"}
ADDRESS = {"type": "object", "properties": {
    "street": {"type": "string"}, "city": {"type": "string"}, "postal_code": {"type": "string", "pattern": "^[0-9A-Z -]{3,10}$"},
    "country": {"type": "string", "minLength": 2, "maxLength": 2, "description": "ISO 3166-1 alpha-2"}},
    "required": ["street", "city", "country"], "additionalProperties": False}
MONEY = {"type": "object", "properties": {"amount": {"type": "number", "minimum": 0},
                                          "currency": {"type": "string", "enum": ["USD", "EUR", "GBP", "JPY"]}},
         "required": ["amount", "currency"], "additionalProperties": False}
PAGE = {"limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}, "cursor": {"type": "string"}}
UNIT = {"type": "string", "enum": ["celsius", "fahrenheit"]}


def _tool(properties: dict, required=(), extra=False) -> dict:
    schema = {"type": "object", "properties": properties, "required": list(required)}
    if not extra:
        schema["additionalProperties"] = False
    return schema


TOOLS = {
    "get_weather": _tool({"location": {"type": "string"}, "unit": UNIT}, ["location"]),
    "get_forecast": _tool({"location": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14},
                           "unit": UNIT, "start": DATE}, ["location", "days"]),
    "create_event": _tool({"title": {"type": "string", "maxLength": 200}, "start": DATE_TIME, "end": DATE_TIME,
                           "attendees": {"type": "array", "items": EMAIL, "uniqueItems": True},
                           "location": ADDRESS, "reminder_minutes": {"type": "integer", "minimum": 0}},
                          ["title", "start", "end"]),
    "list_events": _tool({"from": DATE_TIME, "to": DATE_TIME, **PAGE}, ["from"]),
    "send_email": _tool({"to": {"type": "array", "items": EMAIL, "minItems": 1}, "cc": {"type": "array", "items": EMAIL},
                         "subject": {"type": "string"}, "body": {"type": "string"},
                         "send_at": DATE_TIME}, ["to", "subject", "body"]),
    "search_emails": _tool({"query": {"type": "string"}, "after": DATE, "before": DATE,
                            "has_attachment": {"type": "boolean"}, **PAGE}, ["query"]),
    "read_file": _tool({"path": {"type": "string"}, "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
                        "head": {"type": "integer", "minimum": 1}, "tail": {"type": "integer", "minimum": 1}}, ["path"]),
    "write_file": _tool({"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    "edit_file": _tool({"path": {"type": "string"}, "edits": {"type": "array", "items": _tool(
        {"oldText": {"type": "string"}, "newText": {"type": "string"}}, ["oldText", "newText"])},
        "dryRun": {"type": "boolean", "default": False}}, ["path", "edits"]),
    "list_directory": _tool({"path": {"type": "string"}, "pattern": {"type": "string"},
                             "recursive": {"type": "boolean"}}, ["path"]),
    "move_file": _tool({"source": {"type": "string"}, "destination": {"type": "string"}}, ["source", "destination"]),
    "fetch_url": _tool({"url": URI, "max_length": {"type": "integer", "exclusiveMinimum": 0, "maximum": 1000000},
                        "start_index": {"type": "integer", "minimum": 0}, "raw": {"type": "boolean"}}, ["url"]),
    "http_request": _tool({"method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]}, "url": URI,
                           "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                           "body": {"type": "string"}, "timeout_s": {"type": "number", "minimum": 0, "maximum": 300}},
                          ["method", "url"]),
    "git_commit": _tool({"repo_path": {"type": "string"}, "message": {"type": "string", "minLength": 1},
                         "files": {"type": "array", "items": {"type": "string"}}}, ["repo_path", "message"]),
    "git_log": _tool({"repo_path": {"type": "string"}, "max_count": {"type": "integer", "minimum": 1},
                      "since": DATE_TIME, "author": EMAIL}, ["repo_path"]),
    "git_checkout": _tool({"repo_path": {"type": "string"},
                           "branch": {"type": "string", "pattern": "^[A-Za-z0-9._/-]+$"}}, ["repo_path", "branch"]),
    "create_issue": _tool({"owner": {"type": "string"}, "repo": {"type": "string"}, "title": {"type": "string"},
                           "body": {"type": "string"}, "labels": {"type": "array", "items": {"type": "string"}},
                           "assignees": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
                           "milestone": {"type": ["integer", "null"]}}, ["owner", "repo", "title"]),
    "update_issue": _tool({"owner": {"type": "string"}, "repo": {"type": "string"}, "issue_number": {"type": "integer"},
                           "state": {"type": "string", "enum": ["open", "closed"]},
                           "state_reason": {"type": "string", "enum": ["completed", "not_planned", "reopened"]},
                           "due": DATE}, ["owner", "repo", "issue_number"]),
    "search_repositories": _tool({"query": {"type": "string"}, "sort": {"type": "string",
                                  "enum": ["stars", "forks", "updated"]}, **PAGE}, ["query"]),
    "create_pull_request": _tool({"owner": {"type": "string"}, "repo": {"type": "string"}, "title": {"type": "string"},
                                  "head": {"type": "string"}, "base": {"type": "string"}, "draft": {"type": "boolean"},
                                  "reviewers": {"type": "array", "items": {"type": "string"}}},
                                 ["owner", "repo", "title", "head", "base"]),
    "book_flight": _tool({"origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
                          "destination": {"type": "string", "pattern": "^[A-Z]{3}$"}, "depart": DATE, "return": DATE,
                          "passengers": {"type": "array", "minItems": 1, "maxItems": 9, "items": _tool(
                              {"first_name": {"type": "string"}, "last_name": {"type": "string"}, "birth_date": DATE,
                               "email": EMAIL}, ["first_name", "last_name"])},
                          "cabin": {"type": "string", "enum": ["economy", "premium", "business", "first"]}},
                         ["origin", "destination", "depart", "passengers"]),
    "book_hotel": _tool({"city": {"type": "string"}, "check_in": DATE, "check_out": DATE,
                         "guests": {"type": "integer", "minimum": 1, "maximum": 8}, "max_price": MONEY},
                        ["city", "check_in", "check_out"]),
    "create_order": _tool({"customer_id": UUID, "items": {"type": "array", "minItems": 1, "items": _tool(
        {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}, "unit_price": MONEY},
        ["sku", "quantity"])}, "shipping_address": ADDRESS, "billing_address": ADDRESS, "placed_at": DATE_TIME,
        "coupon": {"type": ["string", "null"]}}, ["customer_id", "items", "shipping_address"]),
    "refund_payment": _tool({"payment_id": UUID, "amount": MONEY, "reason": {"type": "string", "enum": [
        "duplicate", "fraudulent", "requested_by_customer"]}}, ["payment_id"]),
    "get_stock_price": _tool({"symbol": {"type": "string", "pattern": "^[A-Z.]{1,6}$"}, "date": DATE}, ["symbol"]),
    "convert_currency": _tool({"amount": {"type": "number"}, "from": MONEY["properties"]["currency"],
                               "to": MONEY["properties"]["currency"]}, ["amount", "from", "to"]),
    "calculate_route": _tool({"waypoints": {"type": "array", "minItems": 2, "items": _tool(
        {"lat": {"type": "number", "minimum": -90, "maximum": 90},
         "lon": {"type": "number", "minimum": -180, "maximum": 180}}, ["lat", "lon"])},
        "mode": {"type": "string", "enum": ["driving", "walking", "cycling", "transit"]},
        "depart_at": DATE_TIME}, ["waypoints"]),
    "add_contact": _tool({"name": {"type": "string"}, "emails": {"type": "array", "items": EMAIL},
                          "phone": {"type": "string", "pattern": "^\\+?[0-9 ()-]{7,20}$"}, "address": ADDRESS,
                          "birthday": DATE, "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
                         ["name"]),
    "run_sql": _tool({"query": {"type": "string"}, "params": {"type": "array", "items": {
        "type": ["string", "number", "boolean", "null"]}}, "timeout_ms": {"type": "integer", "minimum": 1}}, ["query"]),
    "create_memory": _tool({"entities": {"type": "array", "items": _tool(
        {"name": {"type": "string"}, "entityType": {"type": "string"},
         "observations": {"type": "array", "items": {"type": "string"}}}, ["name", "entityType", "observations"])}},
        ["entities"]),
    "browser_click": _tool({"element": {"type": "string"}, "ref": {"type": "string"},
                            "button": {"type": "string", "enum": ["left", "right", "middle"]},
                            "double_click": {"type": "boolean"}}, ["element", "ref"]),
    "browser_navigate": _tool({"url": URI}, ["url"]),
    "set_reminder": _tool({"text": {"type": "string"}, "at": DATE_TIME,
                           "repeat": {"type": "string", "enum": ["none", "daily", "weekly", "monthly"]}}, ["text", "at"]),
    "translate_text": _tool({"text": {"type": "string"}, "source_lang": {"type": "string", "pattern": "^[a-z]{2}$"},
                             "target_lang": {"type": "string", "pattern": "^[a-z]{2}$"}}, ["text", "target_lang"]),
    "log_workout": _tool({"activity": {"type": "string", "enum": ["run", "ride", "swim", "walk", "strength"]},
                          "duration_min": {"type": "number", "exclusiveMinimum": 0}, "distance_km": {"type": "number"},
                          "started_at": DATE_TIME, "heart_rate": {"type": "object", "properties": {
                              "avg": {"type": "integer"}, "max": {"type": "integer"}}}}, ["activity", "duration_min"]),
    "register_user": _tool({"username": {"type": "string", "pattern": "^[a-z0-9_]{3,20}$"}, "email": EMAIL,
                            "password": {"type": "string", "minLength": 8}, "birth_date": DATE, "address": ADDRESS,
                            "newsletter": {"type": "boolean", "default": False}}, ["username", "email", "password"]),
    "schedule_meeting": _tool({"participants": {"type": "array", "items": EMAIL, "minItems": 2},
                               "duration_minutes": {"type": "integer", "enum": [15, 30, 45, 60, 90]},
                               "earliest": DATE_TIME, "latest": DATE_TIME, "timezone": {"type": "string"}},
                              ["participants", "duration_minutes"]),
}
