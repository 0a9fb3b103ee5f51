"""The API's own description: the OpenAPI document and a browsable page rendered from it.

Neither route asks for a token: the document holds nothing secret, and the ingress decides
whether these paths are reachable from outside at all.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, render_template

from app.openapi import Body, DocsPage, documented, get_spec, page_model

docs = Blueprint("docs", __name__, url_prefix="/spawner/v1")


@docs.get("/openapi.json")
@documented(responses={200: Body("The OpenAPI 3 document.", schema={"type": "object"})})
def openapi_document() -> Response:
    """The OpenAPI 3 document of every route, generated from the code."""
    return jsonify(get_spec(current_app))


@docs.get("/docs")
@documented(responses={200: Body("A self-contained HTML page.", {"type": "string"}, "text/html")})
def docs_page() -> str:
    """The same document as a browsable HTML page, without scripts or external assets."""
    return render_template("docs.html", page=_page())


def _page() -> DocsPage:
    """The page's model, derived once per app from the cached document."""
    page = current_app.extensions.get("openapi_page")
    if not isinstance(page, DocsPage):
        page = page_model(get_spec(current_app))
        current_app.extensions["openapi_page"] = page
    return page
