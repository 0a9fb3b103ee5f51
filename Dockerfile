# The service's image, as the Helm chart runs it: gunicorn serving wsgi:app as a non-root user
# on a read-only root filesystem (the chart mounts /tmp).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /srv/lab-spawner
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY wsgi.py gunicorn.conf.py ./
COPY app ./app
COPY blueprints ./blueprints

RUN groupadd --gid 1000 spawner && useradd --uid 1000 --gid 1000 --no-create-home spawner
USER 1000:1000
EXPOSE 8080
CMD ["gunicorn", "-c", "gunicorn.conf.py", "wsgi:app"]
