"""``hms-txn delegation-token``, ``renew-delegation-token``, ``cancel-delegation-token``.

``delegation-token`` connects to a metastore with Kerberos (a ticket of kinit, or
--principal/--keytab) or SASL PLAIN (a user and a password file), obtains a Hive delegation
token (for the authenticated user, or with --owner for a user a proxy user may act for) and
writes it to a Hadoop credentials file. A Spark (or
any Hadoop/Hive) job started with ``HADOOP_TOKEN_FILE_LOCATION=<that file>`` and
``hive.metastore.sasl.enabled=true`` then authenticates to the metastore with SASL
DIGEST-MD5 and the token, without a password and without Kerberos (see docs/security.md).
The other two renew (by the renewer) and cancel (by owner or renewer) the tokens of such
a file.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys

from hms_txn.cli.connection import add_connection_args, client_for
from hms_txn.cli.errors import CommandError
from hms_txn.domain.security.token_codec import (DEFAULT_ALIAS, KIND, Token, read_credentials,
                                                 write_credentials_file)

EPILOG = """\
Connection: --uri thrift://HOST:PORT, else --conf's hive.metastore.uris, else
thrift://127.0.0.1:PORT with PORT from --conf's hive.metastore.port (9083 by default);
transport, protocol and TLS (hive.metastore.use.SSL, hive.metastore.truststore.path) as
--conf/--hiveconf say. The metastore must have SASL enabled (hive.metastore.sasl.enabled=
true); the command authenticates with SASL PLAIN as --user with the first line of
--password-file, or with Kerberos (hive.metastore.kerberos.principal names the metastore's
principal; the ticket of kinit, or --principal with --keytab).

Use the file from Spark:
  HADOOP_TOKEN_FILE_LOCATION=/path/to/file spark-submit \\
      --conf spark.hadoop.hive.metastore.uris=thrift://HOST:PORT \\
      --conf spark.hadoop.hive.metastore.sasl.enabled=true ...
(add --conf spark.hadoop.hive.metastore.token.signature=S when the token was written with
--signature S)."""


def register_token_commands(sub: argparse._SubParsersAction) -> None:
    fmt = argparse.RawDescriptionHelpFormatter

    def add_auth(p: argparse.ArgumentParser) -> None:
        add_connection_args(p, json_help="print the token's details as JSON")

    p = sub.add_parser(
        "delegation-token", help="obtain a Hive delegation token into a Hadoop credentials file",
        description="Obtain a Hive delegation token (get_delegation_token over Kerberos or "
                    "SASL PLAIN) and write it to a Hadoop credentials file for "
                    "HADOOP_TOKEN_FILE_LOCATION.", epilog=EPILOG, formatter_class=fmt)
    add_auth(p)
    p.add_argument("--owner", help="the token's owner when it is not the authenticated user "
                                   "(a proxy user's request: hadoop.proxyuser.* on the server)")
    p.add_argument("--renewer", help="user allowed to renew the token (default: the "
                                     "authenticated user)")
    p.add_argument("--signature", default="", metavar="S",
                   help="token service; clients select it with hive.metastore.token.signature=S "
                        "(default: empty, what clients look for when that key is unset)")
    p.add_argument("--output", required=True, metavar="PATH",
                   help="credentials file to write (mode 0600; replaced if it exists)")
    p.set_defaults(func=cmd_delegation_token)

    for name, verb, func in (("renew-delegation-token", "renew", cmd_renew_delegation_token),
                             ("cancel-delegation-token", "cancel", cmd_cancel_delegation_token)):
        p = sub.add_parser(name, help=f"{verb} the Hive delegation tokens of a credentials file",
                           description=f"{verb.capitalize()} every Hive delegation token in a "
                                       f"Hadoop credentials file written by `hms-txn "
                                       f"delegation-token`.", epilog=EPILOG, formatter_class=fmt)
        add_auth(p)
        p.add_argument("--token-file", required=True, metavar="PATH",
                       help="Hadoop credentials file holding the token(s)")
        p.set_defaults(func=func)


def _meta_error(err: Exception) -> str:
    return getattr(err, "message", None) or str(err)


def _iso(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).isoformat(timespec="seconds")


def _describe(token: Token) -> dict:
    ident = token.decode_identifier()
    return {"kind": token.kind, "service": token.service, "owner": ident.owner,
            "renewer": ident.renewer, "sequence_number": ident.sequence_number,
            "issue_date": _iso(ident.issue_date), "max_date": _iso(ident.max_date)}


def cmd_delegation_token(args: argparse.Namespace) -> int:
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes

    renewer = args.renewer or args.user or args.principal or _ticket_principal(args)
    client = client_for(args)
    try:
        token_str = client.get_delegation_token(args.owner or args.user or "", renewer)
    except ttypes.MetaException as err:
        print(f"hms-txn: the metastore refused the delegation token: {_meta_error(err)}",
              file=sys.stderr)
        return 1
    finally:
        client.close()
    try:
        token = Token.decode_url_string(token_str).with_service(args.signature)
        info = _describe(token)
    except ValueError as err:
        print(f"hms-txn: the metastore returned something that is not a delegation token: {err}",
              file=sys.stderr)
        return 1
    try:
        write_credentials_file(args.output, [(args.signature or DEFAULT_ALIAS, token)])
    except OSError as err:
        raise CommandError(f"cannot write {args.output}: {err.strerror or err}") from None
    info["file"] = args.output
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"wrote delegation token {info['sequence_number']} of {info['owner']} (renewer "
              f"{info['renewer'] or '-'}, valid at most until {info['max_date']}) to "
              f"{args.output}\nuse it with HADOOP_TOKEN_FILE_LOCATION={args.output} and "
              f"hive.metastore.sasl.enabled=true")
    return 0


def _ticket_principal(args: argparse.Namespace) -> str:
    """The principal of the ticket cache (the default renewer of a Kerberos user's token),
    or "" (the server then records no renewer)."""
    if args.user:
        return ""
    from hms_txn.wire.sasl_gssapi import KerberosFailure, ticket_principal
    try:
        return ticket_principal()
    except KerberosFailure:
        return ""        # the connection reports the missing ticket itself


def _tokens_of(path: str) -> list[Token]:
    try:
        with open(path, "rb") as f:
            entries = read_credentials(f.read())
    except OSError as err:
        raise CommandError(f"cannot read the credentials file {path}: "
                           f"{err.strerror or err}") from None
    except ValueError as err:
        raise CommandError(f"cannot read the credentials file {path}: {err}") from None
    tokens = [t for _alias, t in entries if t.kind == KIND]
    if not tokens:
        raise CommandError(f"{path} holds no {KIND}")
    return tokens


def _each_token(args: argparse.Namespace, call) -> int:
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes

    tokens = _tokens_of(args.token_file)
    client = client_for(args)
    results, failed = [], False
    try:
        for token in tokens:
            info = _describe(token)
            try:
                info.update(call(client, token.encode_url_string()))
            except ttypes.MetaException as err:
                info["error"] = _meta_error(err)
                failed = True
            results.append(info)
    finally:
        client.close()
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for info in results:
            what = f"delegation token {info['sequence_number']} of {info['owner']}"
            if "error" in info:
                print(f"{what}: {info['error']}", file=sys.stderr)
            elif "expires" in info:
                print(f"{what}: renewed until {info['expires']}")
            else:
                print(f"{what}: cancelled")
    return 1 if failed else 0


def cmd_renew_delegation_token(args: argparse.Namespace) -> int:
    return _each_token(args, lambda c, s: {"expires": _iso(c.renew_delegation_token(s))})


def cmd_cancel_delegation_token(args: argparse.Namespace) -> int:
    return _each_token(args, lambda c, s: (c.cancel_delegation_token(s), {})[1])
