"""Local stand-ins for the Google services the gcp_stores tests talk to.

Each fake implements only the calls the stores make, with the status codes and bodies the real
service documents, so the real client libraries run unchanged against them:

* :mod:`.oauth`: a service-account key made on the spot and the OAuth token endpoint it names
  (google-auth signs a JWT with the key; the endpoint checks the signature and hands out a token);
* :mod:`.gcs_proxy`: a proxy in front of ``gcp-storage-emulator`` that adds what the emulator
  lacks (generation preconditions, bearer-token checks) and can inject faults;
* :mod:`.secretmanager`: the Secret Manager REST call ``versions:access``;
* :mod:`.firestore`: a gRPC Firestore server built from the proto types google-cloud-firestore
  ships (get, query, transactions, commit);
* :mod:`.registry`: ``docker-registry`` with htpasswd auth for ``oauth2accesstoken``.
"""
