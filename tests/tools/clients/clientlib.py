"""Shared pieces of the Python client scripts in this folder (imported by them, not run).

Every script prints one JSON document as the last line of stdout and exits 0, or writes one
line to stderr and exits 1. Records are reported in one shape whatever the client:

    {"partition", "offset", "timestamp" (ms or null), "key", "value",
     "headers": [[key, value], ...]}

with keys, values and header values base64 (standard alphabet, padded) or null, so that any
bytes survive JSON; header keys are strings.

The records a producer sends are generated, so that a test knows them without passing them
in: record i (0-based) has key "{prefix}-key-{i}", value "{prefix}-value-{i}" and the headers
[["i", "{i}"], ["client", CLIENT]] (a repeated key would be lost by clients that keep headers
in a map, kafkajs for one).
"""

import argparse
import base64
import json
import os
import sys
import time


CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def b64(data):
    """Base64 of bytes (or of a str's UTF-8), None for None."""
    if data is None:
        return None
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(bytes(data)).decode("ascii")


def record_json(partition, offset, timestamp, key, value, headers):
    return {
        "partition": partition,
        "offset": offset,
        "timestamp": timestamp,
        "key": b64(key),
        "value": b64(value),
        "headers": [[k, b64(v)] for k, v in (headers or [])],
    }


def generated(prefix, i, client):
    """Record i of a producer run: (key, value, headers), all bytes."""
    headers = [("i", str(i).encode()), ("client", client.encode())]
    return f"{prefix}-key-{i}".encode(), f"{prefix}-value-{i}".encode(), headers


def parser(description, role):
    """The arguments every script takes: the bootstrap address, the topic, a time bound; plus
    the group for consumers and the record count and prefix for producers."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("bootstrap", help="host:port of the broker")
    p.add_argument("topic")
    if role == "consumer":
        p.add_argument("group", help="consumer group id")
        p.add_argument("--count", type=int, help="records to read, then commit and stop")
    else:
        p.add_argument("--count", type=int, default=10, help="records to produce (default 10)")
        p.add_argument("--prefix", default="r", help="prefix of generated keys and values")
        p.add_argument("--partition", type=int, help="send every record to this partition (default: the client's partitioner)")
        p.add_argument("--compression", default="none", choices=CODECS)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds the whole run may take (default 30)")
    security_arguments(p)
    return p


def security_arguments(p):
    """The connection's security, the same for every script: TLS when --tls-ca is given
    (mutual TLS with --tls-cert and --tls-key), SASL/PLAIN with --sasl-plain USER:PASSWORD, or
    any SASL mechanism with --sasl-mechanism M --sasl-user U (the password from the environment)."""
    p.add_argument("--tls-ca", help="PEM file of the CA that signed the broker's certificate: connect with TLS")
    p.add_argument("--tls-cert", help="PEM file of this client's certificate (mutual TLS)")
    p.add_argument("--tls-key", help="PEM file of this client's private key (mutual TLS)")
    p.add_argument("--sasl-plain", metavar="USER:PASSWORD", help="authenticate with SASL/PLAIN")
    p.add_argument("--sasl-mechanism", help="authenticate with SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    p.add_argument("--sasl-user", help=f"the SASL user; the password comes from ${PASSWORD_ENV}")


def security_protocol(args):
    """Kafka's security.protocol for the arguments."""
    tls, sasl = args.tls_ca is not None, args.sasl_plain is not None or bool(args.sasl_mechanism)
    return {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT", (True, True): "SASL_SSL"}[(tls, sasl)]


def librdkafka_security(args):
    """The arguments as librdkafka's configuration (confluent-kafka)."""
    config = {"security.protocol": security_protocol(args)}
    if args.tls_ca:
        config["ssl.ca.location"] = args.tls_ca
    if args.tls_cert:
        config["ssl.certificate.location"] = args.tls_cert
        config["ssl.key.location"] = args.tls_key
    if args.sasl_plain:
        user, password = args.sasl_plain.split(":", 1)
        config.update({"sasl.mechanisms": "PLAIN", "sasl.username": user, "sasl.password": password})
    sasl = sasl_librdkafka(args)
    sasl.pop("security.protocol", None)
    return {**config, **sasl}


def python_security(args, ssl_context):
    """The arguments as kafka-python's and aiokafka's keyword arguments; `ssl_context` makes
    the context from (cafile, certfile, keyfile), each client has its own."""
    kwargs = {"security_protocol": security_protocol(args)}
    if args.tls_ca:
        kwargs["ssl_context"] = ssl_context(args.tls_ca, args.tls_cert, args.tls_key)
    if args.sasl_plain:
        user, password = args.sasl_plain.split(":", 1)
        kwargs.update({"sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": password})
    sasl = sasl_kafka_python(args)
    sasl.pop("security_protocol", None)
    return {**kwargs, **sasl}


def ssl_context(cafile, certfile, keyfile):
    """A client TLS context trusting `cafile`, presenting `certfile` when given."""
    import ssl

    context = ssl.create_default_context(cafile=cafile)
    if certfile:
        context.load_cert_chain(certfile, keyfile)
    return context


PASSWORD_ENV = "NANOKAFKA_SASL_PASSWORD"


def sasl_password():
    return os.environ.get(PASSWORD_ENV, "")


def sasl_librdkafka(args):
    """librdkafka's settings (confluent-kafka) for the run's SASL arguments, if any."""
    if not args.sasl_mechanism:
        return {}
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": args.sasl_mechanism,
        "sasl.username": args.sasl_user,
        "sasl.password": sasl_password(),
    }


def sasl_kafka_python(args):
    """kafka-python's and aiokafka's settings for the run's SASL arguments, if any. kafka-python
    only logs a refused login (then times out bootstrapping): its errors go to stderr."""
    if not args.sasl_mechanism:
        return {}
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.ERROR)
    logging.getLogger("kafka").addHandler(handler)
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": args.sasl_mechanism,
        "sasl_plain_username": args.sasl_user,
        "sasl_plain_password": sasl_password(),
    }


def fail_on_authentication_error(err):
    """A librdkafka error callback that ends the run when the broker refuses the login: it
    would otherwise retry until the deadline."""
    from confluent_kafka import KafkaError

    if err.code() == KafkaError._AUTHENTICATION:
        fail(f"authentication failed: {err.str()}")


class Deadline:
    """The one time bound of a run: every network wait is given what is left of it."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds
        self.seconds = seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())

    def left_ms(self):
        return int(self.left() * 1000)

    def expired(self):
        return self.left() <= 0


def emit(doc):
    """Print one JSON document as a line of its own and flush (a reader may be waiting on it)."""
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    sys.stdout.flush()


def fail(message):
    """Exit 1 with one line on stderr."""
    sys.stderr.write(f"{sys.argv[0]}: {message}\n")
    sys.stderr.flush()
    sys.exit(1)


def run(main):
    """Runs `main`, turning any exception into `fail` (a client's exception names the cause)."""
    try:
        main()
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - the point is to report whatever went wrong
        fail(f"{type(e).__name__}: {e}")
