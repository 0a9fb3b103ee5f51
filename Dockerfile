# Two images. `docker build --target fileserver` builds the file-server image: the WebDAV server
# (fileserver/) that a user's file-server Job runs, as the UID and groups the Job gives it
# (nobody's otherwise). The default, last stage is the service's image.
FROM python:3.11-slim AS fileserver

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /srv/fileserver
COPY fileserver/requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY fileserver ./fileserver

USER 65534:65534
EXPOSE 8000
ENTRYPOINT ["python", "-m", "fileserver"]

# The service's image, as the Helm chart runs it: gunicorn serving wsgi:app (the runner
# container runs `python runner.py` instead) as a non-root user
# on a read-only root filesystem (the chart mounts /tmp).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /srv/lab-spawner
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY wsgi.py runner.py gunicorn.conf.py ./
COPY app ./app
COPY blueprints ./blueprints
# Bytecode now, while the filesystem is writable: the root filesystem is read-only at run time
# and PYTHONDONTWRITEBYTECODE is set, so without it every worker would compile the service's
# modules from source at each start (docs/developer/benchmarks.md, "Restart").
RUN python -m compileall -q wsgi.py runner.py gunicorn.conf.py app blueprints

RUN groupadd --gid 1000 spawner && useradd --uid 1000 --gid 1000 --no-create-home spawner
USER 1000:1000
EXPOSE 8080
CMD ["gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"]
