/**
 * The Schema Registry over real HTTP, on the store SEGMENTD_TEST_STORE picks: the onboarding
 * flow exactly as an AEP script sends it (schema, identity descriptors, a dataset from the
 * schema, a streamed record found by its email), the list shapes the Accept header picks,
 * deletion, tenant isolation, and bad input (status, code, message, and nothing stored).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { API_KEY, ORG_A, ORG_B, TOKEN_B, arr, client, obj, startHarness, type Client, type Harness, type Res } from "./helpers/server-harness.js";
import { testStoreKind } from "./helpers/test-store.js";

const SR = "/data/foundation/schemaregistry";
const SCHEMAS = `${SR}/tenant/schemas`;
const DESCRIPTORS = `${SR}/tenant/descriptors`;
const CATALOG = "/data/foundation/catalog/dataSets";
const PROFILE = "https://ns.adobe.com/xdm/context/profile";
const EVENT = "https://ns.adobe.com/xdm/context/experienceevent";
const PERSON = "https://ns.adobe.com/xdm/context/profile-person-details";
const PERSONAL = "https://ns.adobe.com/xdm/context/profile-personal-details";
const TENANT = "aaaaaaaaaaaaaaaaaaaaaaaa";
const BAD_REQUEST = "SEGMENTD-BAD-REQUEST-400";
const BAD_JSON = "UPLIB-101206-500";
const NOT_FOUND = "SEGMENTD-NOT-FOUND-404";
const SUPPORTED = `${PROFILE} and ${EVENT}`;

/** What an AEP script sends with every Schema Registry call. */
const XED = { accept: "application/vnd.adobe.xed+json; version=1", "content-type": "application/json" };
const XED_ID = { accept: "application/vnd.adobe.xed-id+json" };
const XDM = { accept: "application/vnd.adobe.xdm+json" };
const XDM_LINK = { accept: "application/vnd.adobe.xdm-link+json" };

type Obj = Record<string, unknown>;

function schemaBody(title: string, allOf: string[], extra: Obj = {}): Obj {
  return { type: "object", title, description: `${title} schema`, allOf: allOf.map(($ref) => ({ $ref })), ...extra };
}

function identity(schemaId: string, property: string, namespace: string, primary: boolean): Obj {
  return {
    "@type": "xdm:descriptorIdentity", "xdm:sourceSchema": schemaId, "xdm:sourceVersion": 1, "xdm:sourceProperty": property,
    "xdm:namespace": namespace, "xdm:property": "xdm:code", "xdm:isPrimary": primary,
  };
}

/** The service's error body, with exactly this status, code and message. */
function assertError(r: Res, status: number, code: string, message: string, what = message): void {
  assert.equal(r.status, status, `${what}: ${r.text.slice(0, 400)}`);
  const body = obj(r.json);
  assert.equal(typeof body.requestId, "string");
  const items = obj(body.errors)[String(status)] as Obj[];
  // A body schema violation lists the field's problem; the title prefixes it with "Invalid request: ".
  assert.deepEqual(items.map((i) => ({ code: i.code, message: i.message })), [{ code, message: message.replace(/^Invalid request: /, "") }], what);
  assert.equal(body.title, message, what);
  assert.equal(body.status, status, what);
}

async function created(r: Res): Promise<Obj> {
  assert.equal(r.status, 201, r.text.slice(0, 400));
  assert.match(r.headers.get("content-type") ?? "", /^application\/json/);
  return obj(r.json);
}

const datasetIdOf = (r: Res): string => {
  assert.equal(r.status, 201, r.text.slice(0, 400));
  return String(arr(r.json)[0]).replace("@/dataSets/", "");
};

describe(`Schema Registry over HTTP (${testStoreKind()})`, () => {
  let h: Harness;
  let a: Client;
  let dev: Client;
  let b: Client;
  before(async () => {
    h = await startHarness("schema-registry");
    a = client(h.url);
    dev = client(h.url, { sandbox: "dev" });
    b = client(h.url, { token: TOKEN_B, org: ORG_B });
  });
  after(async () => h.close());

  it("onboards as AEP does: a schema, a primary and a second identity descriptor, a dataset from the schema, a streamed record found by its email", async () => {
    const before = Date.now();
    const schema = await created(await a.post(SCHEMAS, schemaBody("Loyalty Members", [PROFILE, PERSON, PERSONAL]), XED));
    const key = /^https:\/\/ns\.adobe\.com\/aaaaaaaaaaaaaaaaaaaaaaaa\/schemas\/([0-9a-f]{32})$/.exec(String(schema.$id))?.[1];
    assert.ok(key, `$id ${String(schema.$id)}`);
    const meta = obj(schema["meta:registryMetadata"]);
    assert.ok(typeof meta["repo:createdDate"] === "number" && meta["repo:createdDate"] >= before);
    assert.match(String(meta.eTag), /^[0-9a-f]{64}$/);
    assert.equal(typeof schema["meta:sandboxId"], "string");
    assert.deepEqual(schema, {
      $id: `https://ns.adobe.com/${TENANT}/schemas/${key}`,
      "meta:altId": `_${TENANT}.schemas.${key}`,
      "meta:resourceType": "schemas",
      version: "1.0",
      title: "Loyalty Members",
      description: "Loyalty Members schema",
      type: "object",
      allOf: [PROFILE, PERSON, PERSONAL].map(($ref) => ({ $ref, type: "object", "meta:xdmType": "object" })),
      refs: [PROFILE, PERSON, PERSONAL],
      imsOrg: ORG_A,
      "meta:extensible": false,
      "meta:abstract": false,
      "meta:extends": [PROFILE, PERSON, PERSONAL],
      "meta:xdmType": "object",
      "meta:class": PROFILE,
      "meta:containerId": "tenant",
      "meta:sandboxId": schema["meta:sandboxId"],
      "meta:sandboxType": "production",
      "meta:tenantNamespace": `_${TENANT}`,
      "meta:registryMetadata": {
        "repo:createdDate": meta["repo:createdDate"], "repo:lastModifiedDate": meta["repo:createdDate"],
        "xdm:createdClientId": API_KEY, "xdm:lastModifiedClientId": API_KEY, eTag: meta.eTag,
      },
    });
    const schemaId = String(schema.$id);
    // Looked up by meta:altId or by the URL-encoded $id.
    for (const id of [String(schema["meta:altId"]), encodeURIComponent(schemaId)]) {
      const got = await a.get(`${SCHEMAS}/${id}`, XED);
      assert.equal(got.status, 200, got.text);
      assert.deepEqual(got.json, schema);
    }

    const email = await created(await a.post(DESCRIPTORS, identity(schemaId, "/personalEmail/address", "Email", true), XED));
    assert.match(String(email["@id"]), /^[0-9a-f]{40}$/);
    assert.deepEqual(email, { ...identity(schemaId, "/personalEmail/address", "Email", true), "meta:containerId": "tenant", "@id": email["@id"] });
    const phone = await created(await a.post(DESCRIPTORS, identity(String(schema["meta:altId"]), "/mobilePhone/number", "Phone", false), XED));
    // A schema named by meta:altId is stored by its $id.
    assert.equal(phone["xdm:sourceSchema"], schemaId);
    assert.deepEqual((await a.get(DESCRIPTORS, XDM_LINK)).json, { "xdm:descriptorIdentity": [`/descriptors/${String(email["@id"])}`, `/descriptors/${String(phone["@id"])}`] });
    assert.deepEqual((await a.get(DESCRIPTORS, XDM)).json, [email, phone]);
    assert.deepEqual((await a.get(DESCRIPTORS, { accept: "application/vnd.adobe.xdm-id+json" })).json, [email["@id"], phone["@id"]]);
    assert.deepEqual((await a.get(`${DESCRIPTORS}/${String(email["@id"])}`, XDM)).json, email);

    const datasetId = datasetIdOf(await a.post(CATALOG, {
      name: "Loyalty members", schemaRef: { id: schemaId, contentType: "application/vnd.adobe.xed+json;version=1" }, tags: { unifiedProfile: ["enabled:true"] },
    }, { "content-type": "application/json" }));
    const dataset = obj(obj((await a.get(`${CATALOG}/${datasetId}`)).json)[datasetId]);
    assert.deepEqual(dataset.schemaRef, { id: schemaId, contentType: "application/vnd.adobe.xed+json;version=1" });
    assert.equal(dataset.schemaClass, "profile");
    assert.deepEqual(dataset.identityFields, [
      { path: "personalEmail.address", namespace: "Email", primary: true },
      { path: "mobilePhone.number", namespace: "Phone", primary: false },
    ]);
    assert.deepEqual(obj(obj((await a.get(CATALOG)).json)[datasetId]).schemaRef, dataset.schemaRef);

    // A record with no identityMap: its identities come from the schema's descriptors.
    const stream = await a.post("/collection/loyalty-connection?syncValidation=true", {
      header: { datasetId, schemaRef: { id: schemaId, contentType: "application/vnd.adobe.xed-full+json;version=1" } },
      body: { xdmMeta: { schemaRef: { id: schemaId } }, xdmEntity: { personalEmail: { address: "ann@example.com" }, mobilePhone: { number: "+15550100" }, person: { name: { firstName: "Ann" } } } },
    });
    assert.equal(stream.status, 200, stream.text);
    const byEmail = await a.get("/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=ann%40example.com&entityIdNS=Email");
    assert.equal(byEmail.status, 200, byEmail.text);
    const [profileId, view] = Object.entries(obj(byEmail.json))[0]!;
    const entity = obj(obj(view).entity);
    assert.deepEqual(obj(entity.person), { name: { firstName: "Ann" } });
    assert.deepEqual(entity.identities, [{ id: "ann@example.com", namespace: { code: "email" } }, { id: "+15550100", namespace: { code: "phone" } }]);
    const byPhone = await a.get("/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=%2B15550100&entityIdNS=Phone");
    assert.deepEqual(Object.keys(obj(byPhone.json)), [profileId]);
    assert.equal((await a.get("/data/core/ups/access/entities?schema.name=_xdm.context.profile&entityId=bob%40example.com&entityIdNS=Email")).status, 404);

    // A dataset named by meta:altId shows the $id as well; an explicit identityFields wins over the descriptors.
    const byAlt = datasetIdOf(await a.post(CATALOG, { name: "by altId", schemaRef: { id: schema["meta:altId"] } }));
    assert.equal(obj(obj(obj((await a.get(`${CATALOG}/${byAlt}`)).json)[byAlt]).schemaRef).id, schemaId);
    const own = datasetIdOf(await a.post(CATALOG, { name: "own identities", schemaRef: { id: schemaId }, identityFields: [{ path: "loyalty.id", namespace: "LoyaltyId", primary: true }] }));
    assert.deepEqual(obj(obj((await a.get(`${CATALOG}/${own}`)).json)[own]).identityFields, [{ path: "loyalty.id", namespace: "LoyaltyId", primary: true }]);
  });

  it("an experience-event schema makes an event dataset", async () => {
    const schema = await created(await a.post(SCHEMAS, schemaBody("Web events", [EVENT, "https://ns.adobe.com/xdm/context/experienceevent-web"], { "meta:class": EVENT }), XED));
    assert.equal(schema["meta:class"], EVENT);
    const id = datasetIdOf(await a.post(CATALOG, { name: "web", schemaRef: { id: schema.$id } }));
    const ds = obj(obj((await a.get(`${CATALOG}/${id}`)).json)[id]);
    assert.equal(ds.schemaClass, "experienceevent");
    assert.deepEqual(ds.identityFields, []);
  });

  it("lists schemas: xed-id by default, whole schemas for xed+json, by title, paged with start and limit", async () => {
    const made: Obj[] = [];
    for (const t of ["Bravo", "Alpha", "Charlie"]) made.push(await created(await dev.post(SCHEMAS, schemaBody(t, [PROFILE]), XED)));
    const [bravo, alpha, charlie] = made as [Obj, Obj, Obj];
    const short = (s: Obj) => ({ $id: s.$id, "meta:altId": s["meta:altId"], version: "1.0", title: s.title });
    for (const headers of [{}, XED_ID]) {
      const r = await dev.get(SCHEMAS, headers);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json, { results: [alpha, bravo, charlie].map(short), _page: { orderby: "title", next: null, count: 3 }, _links: {} });
    }
    assert.deepEqual(obj((await dev.get(SCHEMAS, XED)).json).results, [alpha, bravo, charlie]);
    const first = await dev.get(`${SCHEMAS}?limit=2`, XED_ID);
    assert.deepEqual(first.json, {
      results: [alpha, bravo].map(short), _page: { orderby: "title", next: "2", count: 2 },
      _links: { next: { href: `${SCHEMAS}?orderby=title&start=2&limit=2` } },
    });
    assert.deepEqual((await dev.get(`${SCHEMAS}?orderby=title&start=2&limit=2`)).json, { results: [short(charlie)], _page: { orderby: "title", next: null, count: 1 }, _links: {} });
    assert.deepEqual(obj((await dev.get(`${SCHEMAS}?orderby=-title`)).json).results, [charlie, bravo, alpha].map(short));
    assertError(await dev.get(`${SCHEMAS}?orderby=created`), 400, BAD_REQUEST, 'orderby "created" is not supported: use title or -title');
    // The other sandbox and org see none of them.
    assert.deepEqual(obj((await b.get(SCHEMAS)).json).results, []);
  });

  it("deleting: refused (409) while a dataset made from the schema exists; then the schema and its descriptors go", async () => {
    const schema = await created(await dev.post(SCHEMAS, schemaBody("To delete", [PROFILE, PERSON]), XED));
    const id = String(schema.$id);
    const d = await created(await dev.post(DESCRIPTORS, identity(id, "/personalEmail/address", "Email", true), XED));
    const datasetId = datasetIdOf(await dev.post(CATALOG, { name: "uses it", schemaRef: { id } }));
    assertError(await dev.delete(`${SCHEMAS}/${encodeURIComponent(id)}`), 409, "SEGMENTD-CONFLICT-409", `Schema ${id} is used by dataset(s) ${datasetId}: delete them before the schema`);
    assert.deepEqual((await dev.get(`${SCHEMAS}/${encodeURIComponent(id)}`, XED)).json, schema);
    assert.deepEqual((await dev.get(`${DESCRIPTORS}/${String(d["@id"])}`)).json, d);

    assert.equal((await dev.delete(`${CATALOG}/${datasetId}`)).status, 200);
    const gone = await dev.delete(`${SCHEMAS}/${String(schema["meta:altId"])}`);
    assert.equal(gone.status, 204, gone.text);
    assert.equal(gone.text, "");
    assertError(await dev.get(`${SCHEMAS}/${encodeURIComponent(id)}`), 404, NOT_FOUND, `Schema with id '${id}' was not found`);
    assertError(await dev.get(`${DESCRIPTORS}/${String(d["@id"])}`), 404, NOT_FOUND, `Descriptor with id '${String(d["@id"])}' was not found`);
    assert.ok(!arr((await dev.get(DESCRIPTORS, XDM)).json).some((x) => obj(x)["@id"] === d["@id"]));
    assertError(await dev.delete(`${SCHEMAS}/${encodeURIComponent(id)}`), 404, NOT_FOUND, `Schema with id '${id}' was not found`);
  });

  it("deleting a descriptor: 204, then 404; a dataset made afterwards takes the descriptors left, an earlier one keeps its own", async () => {
    const schema = await created(await dev.post(SCHEMAS, schemaBody("Descriptor delete", [PROFILE]), XED));
    const e = await created(await dev.post(DESCRIPTORS, identity(String(schema.$id), "/personalEmail/address", "Email", true), XED));
    await created(await dev.post(DESCRIPTORS, identity(String(schema.$id), "/loyalty/id", "LoyaltyId", false), XED));
    const earlier = datasetIdOf(await dev.post(CATALOG, { name: "before", schemaRef: { id: schema.$id } }));
    const earlierFields = [{ path: "personalEmail.address", namespace: "Email", primary: true }, { path: "loyalty.id", namespace: "LoyaltyId", primary: false }];
    assert.deepEqual(obj(obj((await dev.get(`${CATALOG}/${earlier}`)).json)[earlier]).identityFields, earlierFields);
    const r = await dev.delete(`${DESCRIPTORS}/${String(e["@id"])}`);
    assert.equal(r.status, 204, r.text);
    assertError(await dev.delete(`${DESCRIPTORS}/${String(e["@id"])}`), 404, NOT_FOUND, `Descriptor with id '${String(e["@id"])}' was not found`);
    // The primary is free again.
    await created(await dev.post(DESCRIPTORS, identity(String(schema.$id), "/crmId", "CRMID", true), XED));
    const id = datasetIdOf(await dev.post(CATALOG, { name: "after", schemaRef: { id: schema.$id } }));
    assert.deepEqual(obj(obj((await dev.get(`${CATALOG}/${id}`)).json)[id]).identityFields, [
      { path: "loyalty.id", namespace: "LoyaltyId", primary: false },
      { path: "crmId", namespace: "CRMID", primary: true },
    ]);
    // Taken when the dataset was created: the earlier dataset keeps its identity fields.
    assert.deepEqual(obj(obj((await dev.get(`${CATALOG}/${earlier}`)).json)[earlier]).identityFields, earlierFields);
  });

  it("bad input: each answered with its status, code and message, and nothing stored", async () => {
    const schema = await created(await a.post(SCHEMAS, schemaBody("Guarded", [PROFILE]), XED));
    const id = String(schema.$id);
    const primaryId = String((await created(await a.post(DESCRIPTORS, identity(id, "/personalEmail/address", "Email", true), XED)))["@id"]);
    const snapshot = async () => ({
      a: [(await a.get(SCHEMAS, XED)).json, (await a.get(DESCRIPTORS, XDM)).json, (await a.get(CATALOG)).json],
      b: [(await b.get(SCHEMAS, XED)).json, (await b.get(DESCRIPTORS, XDM)).json, (await b.get(CATALOG)).json],
    });
    const before = await snapshot();
    assert.deepEqual(before.b, [{ results: [], _page: { orderby: "title", next: null, count: 0 }, _links: {} }, [], {}]);

    const badSchemas: Array<[Obj | string, string, string]> = [
      [schemaBody("x", ["https://ns.adobe.com/xdm/classes/segmentdefinition", PERSON]), BAD_REQUEST,
        `Class https://ns.adobe.com/xdm/classes/segmentdefinition is not supported: segmentd's Schema Registry supports the classes ${SUPPORTED}`],
      [schemaBody("x", [PROFILE], { "meta:class": "https://ns.adobe.com/xdm/classes/fsi/financial-account" }), BAD_REQUEST,
        `Class https://ns.adobe.com/xdm/classes/fsi/financial-account is not supported: segmentd's Schema Registry supports the classes ${SUPPORTED}`],
      [schemaBody("x", [PERSON]), BAD_REQUEST, `allOf must reference exactly one class (it references none): ${SUPPORTED} are supported, beside field groups`],
      [schemaBody("x", [PROFILE, EVENT]), BAD_REQUEST, `allOf must reference exactly one class (it references ${PROFILE}, ${EVENT}): ${SUPPORTED} are supported, beside field groups`],
      [schemaBody("x", [PROFILE], { "meta:class": EVENT }), BAD_REQUEST, `meta:class ${EVENT} differs from the class allOf references (${PROFILE})`],
      [schemaBody("x", [PROFILE, PERSON, PERSON]), BAD_REQUEST, `allOf references ${PERSON} twice`],
      [schemaBody(" ", [PROFILE]), BAD_REQUEST, "title must not be empty"],
      [{ type: "object", allOf: [{ $ref: PROFILE }] }, BAD_JSON, "Invalid request: title is required"],
      [schemaBody("x".repeat(257), [PROFILE]), BAD_JSON, "Invalid request: title must NOT have more than 256 characters"],
      [schemaBody("x", [PROFILE, ...Array.from({ length: 50 }, (_, i) => `https://ns.adobe.com/xdm/mixins/fg-${i}`)]), BAD_JSON, "Invalid request: allOf must NOT have more than 50 items"],
      [schemaBody("x", []), BAD_JSON, "Invalid request: allOf must NOT have fewer than 1 items"],
      [schemaBody("x", [PROFILE], { type: "array" }), BAD_JSON, "Invalid request: type must be equal to constant"],
      [schemaBody("x", [PROFILE], { "meta:extensible": true }), BAD_JSON, "Invalid request: meta:extensible is not allowed"],
      [schemaBody("x", ["not a uri"]), BAD_JSON, 'Invalid request: allOf.0.$ref must match format "uri"'],
      [{ ...schemaBody("x", []), allOf: [{ $ref: PROFILE, "meta:title": "x" }] }, BAD_JSON, "Invalid request: allOf.0.meta:title is not allowed"],
      [{ ...schemaBody("x", []), allOf: [{ type: "object" }] }, BAD_JSON, "Invalid request: allOf.0.$ref is required"],
      ['{"title": "x", "type": "object", "allOf": [', BAD_JSON, "Malformed JSON in request body: Unexpected end of JSON input"],
    ];
    for (const [body, code, message] of badSchemas) assertError(await a.post(SCHEMAS, body, XED), 400, code, message);

    const pk = "/personalEmail/address";
    const badDescriptors: Array<[Client, Obj, string, string]> = [
      [a, { ...identity(id, "/loyalty/id", "Loyalty", false), "@type": "xdm:descriptorOneToOne" }, BAD_REQUEST,
        "Descriptor type xdm:descriptorOneToOne is not supported: segmentd's Schema Registry supports xdm:descriptorIdentity only"],
      [a, identity(id, "/crmId", "CRMID", true), BAD_REQUEST, `Schema ${id} has a primary identity descriptor already (${primaryId}): a schema has at most one`],
      [a, identity(id, pk, "Email", false), BAD_REQUEST, `Schema ${id} has an identity descriptor on ${pk} already (${primaryId})`],
      [a, { "@type": "xdm:descriptorIdentity", "xdm:sourceSchema": id, "xdm:sourceProperty": "/crmId" }, BAD_REQUEST, "An xdm:descriptorIdentity needs xdm:namespace"],
      [a, { ...identity(id, "/crmId", "CRMID", false), "xdm:destinationSchema": id }, BAD_REQUEST, "xdm:destinationSchema is not a field of an xdm:descriptorIdentity"],
      [a, { ...identity(id, "/crmId", "CRMID", false), "xdm:sourceVersion": 2 }, BAD_REQUEST, "xdm:sourceVersion must be 1: schemas are not versioned"],
      [a, { ...identity(id, "/crmId", "CRMID", false), "xdm:property": "xdm:id" }, BAD_REQUEST, "xdm:property xdm:id is not supported: identity namespaces are named by code (xdm:code)"],
      [a, identity(id, "/a.b/c", "CRMID", false), BAD_REQUEST, 'xdm:sourceProperty "/a.b/c" must be a JSON pointer to a field (e.g. /personalEmail/address) whose names are not empty and hold no "."'],
      [a, identity(id, "personalEmail.address", "Email", false), BAD_JSON, 'Invalid request: xdm:sourceProperty must match pattern "^(/[^/]+)+$"'],
      [a, identity(`https://ns.adobe.com/${TENANT}/schemas/0123456789abcdef0123456789abcdef`, "/crmId", "CRMID", false), BAD_REQUEST,
        `xdm:sourceSchema https://ns.adobe.com/${TENANT}/schemas/0123456789abcdef0123456789abcdef is not a schema of this sandbox`],
      // Another org cannot put a descriptor on org A's schema.
      [b, identity(id, "/crmId", "CRMID", false), BAD_REQUEST, `xdm:sourceSchema ${id} is not a schema of this sandbox`],
      [a, { ...identity(id, "/crmId", "CRMID", false), "xdm:isPrimary": "yes" }, BAD_JSON, "Invalid request: xdm:isPrimary must be boolean"],
      [a, { "xdm:sourceSchema": id }, BAD_JSON, "Invalid request: @type is required"],
    ];
    for (const [who, body, code, message] of badDescriptors) assertError(await who.post(DESCRIPTORS, body, XED), 400, code, message);

    // Org B and the dev sandbox of org A see nothing of it, and cannot delete it.
    for (const who of [b, dev]) {
      assertError(await who.get(`${SCHEMAS}/${encodeURIComponent(id)}`, XED), 404, NOT_FOUND, `Schema with id '${id}' was not found`);
      assertError(await who.get(`${SCHEMAS}/${String(schema["meta:altId"])}`, XED), 404, NOT_FOUND, `Schema with id '${String(schema["meta:altId"])}' was not found`);
      assertError(await who.delete(`${SCHEMAS}/${encodeURIComponent(id)}`), 404, NOT_FOUND, `Schema with id '${id}' was not found`);
      assertError(await who.get(`${DESCRIPTORS}/${primaryId}`), 404, NOT_FOUND, `Descriptor with id '${primaryId}' was not found`);
      assertError(await who.delete(`${DESCRIPTORS}/${primaryId}`), 404, NOT_FOUND, `Descriptor with id '${primaryId}' was not found`);
    }

    // Datasets: an unknown tenant schema, and org A's schema from org B.
    for (const [who, sid] of [[a, `https://ns.adobe.com/${TENANT}/schemas/0123456789abcdef0123456789abcdef`], [a, `_${TENANT}.schemas.0123`], [b, id]] as const) {
      assertError(await who.post(CATALOG, { name: "x", schemaRef: { id: sid, contentType: "application/vnd.adobe.xed+json;version=1" } }), 400, BAD_REQUEST,
        `Unknown schema: schemaRef.id ${JSON.stringify(sid)} is not a schema of this sandbox (GET /data/foundation/schemaregistry/tenant/schemas lists them)`);
    }
    assertError(await a.post(CATALOG, { name: "x", schemaRef: { id }, schemaClass: "experienceevent" }), 400, BAD_REQUEST, `schemaClass experienceevent contradicts the class of schema ${id} (profile)`);

    assert.deepEqual(await snapshot(), before, "nothing stored");
  });

  it("is in the OpenAPI document", async () => {
    const doc = obj((await client(h.url).get("/openapi.json")).json);
    assert.deepEqual(Object.keys(obj(doc.paths)).filter((p) => p.startsWith(SR)), [
      SCHEMAS, `${SCHEMAS}/{schemaId}`, DESCRIPTORS, `${DESCRIPTORS}/{descriptorId}`,
    ]);
  });

  it("answers only authenticated callers of a known sandbox", async () => {
    const anonymous = client(h.url, { token: null });
    const r = await anonymous.get(SCHEMAS);
    assert.equal(r.status, 403);
    assert.deepEqual(r.json, { error_code: "403010", message: "Oauth token is missing" });
    const noSandbox = await client(h.url, { sandbox: null }).post(SCHEMAS, schemaBody("x", [PROFILE]), XED);
    assert.equal(noSandbox.status, 400);
    assert.deepEqual(noSandbox.json, { error_code: "400003", message: "Missing header: x-sandbox-name" });
    // A body without Content-Type is JSON; another content type is Adobe's 400, as on every route.
    const untyped = await a.post(SCHEMAS, schemaBody("Untyped", [PROFILE]), { "content-type": "" });
    assert.equal(untyped.status, 201, untyped.text);
    const plain = await a.post(SCHEMAS, JSON.stringify(schemaBody("Plain", [PROFILE])), { "content-type": "text/plain" });
    assert.equal(plain.status, 400);
    assert.deepEqual(plain.json, { type: "/placeholder/type/uri", status: 400, title: "BadRequestError", detail: "A valid content-type must be specified" });
    assert.ok(!arr(obj((await a.get(SCHEMAS)).json).results).some((s) => obj(s).title === "Plain"));
  });
});
