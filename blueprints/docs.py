"""The API's own description: the OpenAPI document and a browsable page rendered from it.

Neither route asks for a token: the document holds nothing secret, and the ingress decides
whether these paths are reachable from outside at all.
"""

from __future__ import annotations

from flask import Response, current_app, jsonify, render_template

from app.extensions import api_ext
from app.web.api import ApiBlueprint
from app.web.api_page import DocsPage, page_model

docs = ApiBlueprint("docs", __name__, url_prefix="/spawner/v1")


@docs.get("/openapi.json")
@docs.response(200, {"type": "object"}, description="The OpenAPI 3 document.")
def openapi_document() -> Response:
    """The OpenAPI 3 document of every route, generated from the code."""
    return jsonify(api_ext.document())


@docs.get("/docs")
@docs.text_response("text/html", description="A self-contained HTML page.")
def docs_page() -> Response:
    """The same document as a browsable HTML page, without scripts or external assets."""
    return Response(render_template("docs.html", page=_page()), mimetype="text/html")


def _page() -> DocsPage:
    """The page's model, derived once per app from the cached document."""
    page = current_app.extensions.get("api_page")
    if not isinstance(page, DocsPage):
        page = page_model(api_ext.document())
        current_app.extensions["api_page"] = page
    return page
